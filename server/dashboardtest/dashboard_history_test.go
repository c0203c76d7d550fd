package dashboardtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

// The dashboard draws the server's history: an entity's page opens on
// the samples the server took before it was opened, with this server's
// rates of the entity's messages, and draws the newer ones every 5 s;
// the streams view draws the lag of a consumer whose events nobody
// delivers, and of the subscription picked. Each chart is read for what
// it draws, and screenshots are kept.
func TestDashboardHistory(t *testing.T) {
	path := chromium(t)
	e := servertest.Start(t, "sqlite", server.Config{HistoryInterval: 250 * time.Millisecond})
	ctx := t.Context()
	c := e.Remote(t, nil)
	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	history := func() []client.EntitySample {
		t.Helper()
		_, s, err := c.EntityHistory(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Once the queue is sampled, what the API does to it shows in the
	// rates of a later sample.
	servertest.WaitFor(t, "sample of orders", 30*time.Second, func() bool { return len(history()) > 0 })
	snd, _ := c.NewSender("orders")
	if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("1")}, {Body: []byte("2")}, {Body: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := c.NewReceiver("orders", nil)
	got, err := r.Receive(ctx, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("Receive = %v, %v", got, err)
	}
	if err := r.Complete(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	// ghost's subscription: nobody delivers its events, so it lags.
	stream := sluice.StreamID{Namespace: "shop", Key: "k"}
	if _, err := e.Lib.Subscribe(ctx, stream, "ghost", sluice.FromBeginning()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Lib.Publish(ctx, stream, sluice.Event{Body: []byte("a")}, sluice.Event{Body: []byte("b")}, sluice.Event{Body: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	var before []client.EntitySample
	servertest.WaitFor(t, "samples of the rates, the counts and the lag", 30*time.Second, func() bool {
		before = history()
		_, lags, err := c.ConsumerLagHistory(ctx, "ghost", 0)
		if err != nil {
			t.Fatal(err)
		}
		var sent, received, settled bool
		for _, s := range before {
			sent, received, settled = sent || s.Sent > 0, received || s.Received > 0, settled || s.Settled > 0
		}
		last := before[len(before)-1]
		return sent && received && settled && last.Active == 1 && last.InFlight == 1 && len(lags) == 1 &&
			lags[0].Samples[len(lags[0].Samples)-1].Lag == 3
	})
	opened := time.Now()

	bctx := newBrowser(t, path)
	pg := page{t, bctx}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("dashboard: screenshot: %v", err)
		}
		checkShot(t, png)
		if err := os.WriteFile(artifact(t, "dashboard-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// drawn reads a chart: its samples, from when, and for each line
	// (by class, or label when it has one) whether it rises above zero.
	type drawing struct {
		samples int
		from    time.Time
		lines   map[string]bool
		caption string
	}
	drawn := func(css string) drawing {
		t.Helper()
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
			const svg = document.querySelector(`+strconv.Quote(css)+`);
			if (!svg) return [];
			const zero = Math.max(...[...svg.querySelectorAll("line")].map((l) => +l.getAttribute("y1")));
			return [svg.dataset.samples, svg.dataset.from || "", svg.querySelector("text.caption").textContent,
				...[...svg.querySelectorAll("polyline")].map((l) => (l.dataset.label || l.getAttribute("class")) + "=" +
					(l.getAttribute("points") || "").split(" ").some((p) => p && +p.split(",")[1] < zero))];
		})()`))
		if err != nil {
			t.Fatalf("dashboard: reading %s: %v", css, err)
		}
		if len(raw) < 3 {
			t.Fatalf("dashboard: no chart %s", css)
		}
		d := drawing{lines: map[string]bool{}, caption: raw[2]}
		d.samples, _ = strconv.Atoi(raw[0])
		if raw[1] != "" {
			if d.from, err = time.Parse(time.RFC3339Nano, raw[1]); err != nil {
				t.Fatalf("%s starts at %q: %v", css, raw[1], err)
			}
		}
		for _, l := range raw[3:] {
			name, up, _ := strings.Cut(l, "=")
			d.lines[name] = up == "true"
		}
		return d
	}

	// The entity's page opens on the samples taken before it opened.
	pg.do("open orders' page", chromedp.Navigate(e.URL+"/#entity/orders"),
		chromedp.WaitVisible(chromedp.CSS(`#entity-chart svg`)), chromedp.WaitVisible(chromedp.CSS(`#entity-rates svg`)))
	counts, rates := drawn("#entity-chart svg"), drawn("#entity-rates svg")
	if counts.samples < len(before) || counts.from.IsZero() || counts.from.After(before[len(before)-1].At) {
		t.Errorf("the counts chart draws %d samples from %v; want at least the %d taken before the page opened at %v, from %v on",
			counts.samples, counts.from, len(before), opened, before[0].At)
	}
	if !counts.lines["active"] || !counts.lines["inFlight"] || counts.lines["deadLettered"] || counts.lines["scheduled"] {
		t.Errorf("the counts chart's lines above zero: %v; want active and in flight, not dead-lettered or scheduled", counts.lines)
	}
	if !rates.lines["sent"] || !rates.lines["received"] || !rates.lines["settled"] || !strings.Contains(rates.caption, "msg/s") {
		t.Errorf("the rates chart (%q): lines above zero %v; want sent, received and settled", rates.caption, rates.lines)
	}
	shot("entity-history")
	// Every 5 s, the newer samples.
	pg.wait("the chart redrawn with newer samples",
		fmt.Sprintf(`+document.querySelector("#entity-chart svg").dataset.samples > %d`, counts.samples))

	// The streams view: ghost's lag over time, and its subscription's.
	pg.do("the streams view", chromedp.Navigate(e.URL+"/#streams"),
		chromedp.WaitVisible(chromedp.CSS(`#lag-chart svg polyline[data-label="ghost · shop"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#sub-lag-chart svg polyline.lag`)))
	lag, subLag := drawn("#lag-chart svg"), drawn("#sub-lag-chart svg")
	if !lag.lines["ghost · shop"] || lag.samples == 0 || !strings.HasPrefix(lag.caption, "peak 3 records over ") {
		t.Errorf("the lag chart (%q, %d samples): lines above zero %v; want ghost · shop's", lag.caption, lag.samples, lag.lines)
	}
	if legend := pg.text(`#lag-legend`); legend != "ghost · shop" {
		t.Errorf("the lag chart's legend: %q", legend)
	}
	if !subLag.lines["lag"] || !strings.HasPrefix(subLag.caption, "peak 3 records over ") || !strings.Contains(subLag.caption, "ghost · shop/k") {
		t.Errorf("the subscription's lag chart (%q): lines above zero %v", subLag.caption, subLag.lines)
	}
	shot("streams-lag")
}
