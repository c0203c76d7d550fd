package dashboardtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

// An entity's page, linked by its URL: its settings, its counts by
// state, its messages browsed by state with a message's detail, and the
// actions (cancel scheduled, resubmit and purge dead letters) behind a
// confirmation; the screenshot is checked to be a rendered page.
func TestDashboardEntityPage(t *testing.T) {
	path := chromium(t)
	e := servertest.Start(t, "sqlite", server.Config{HistoryInterval: 200 * time.Millisecond})
	ctx := t.Context()
	lib := e.Lib
	if _, err := lib.CreateQueue(ctx, "orders", &sluice.QueueProperties{LockDuration: 30 * time.Second, MaxDeliveryCount: 3}); err != nil {
		t.Fatal(err)
	}
	snd, _ := lib.NewSender("orders")
	if _, err := snd.SendBatch(ctx, []*sluice.Message{{Body: []byte("to defer")}, {Body: []byte("to lock")}, {Body: []byte("to dead-letter")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := lib.NewReceiver("orders", nil)
	got, err := r.Receive(ctx, 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("Receive = %v, %v", got, err)
	}
	if err := r.Defer(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	if err := r.DeadLetter(ctx, got[2], &sluice.DeadLetterOptions{Reason: "OutOfStock", Description: "no pizza left"}); err != nil {
		t.Fatal(err)
	}
	if _, err := snd.SendBatch(ctx, []*sluice.Message{
		{Body: []byte("pizza"), MessageID: "m-4", Subject: "order", ApplicationProperties: map[string]string{"size": "L"}},
		{Body: []byte("pasta")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("later"), ScheduledEnqueueTime: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("stale"), TimeToLive: ttl}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + 100*time.Millisecond) // its life; nothing receives it

	bctx := newBrowser(t, path)
	pg := page{t, bctx}
	do, text, wait := pg.do, pg.text, pg.wait
	choose := func(state string) {
		t.Helper()
		do("choose "+state, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("entity-state"); s.value = "`+state+
			`"; s.dispatchEvent(new Event("change")); })()`))
	}

	// The page's URL opens it; every message's state shows.
	do("open the entity's URL", chromedp.Navigate(e.URL+"/#entity/orders"),
		chromedp.WaitVisible(chromedp.CSS(`#entity-messages tbody tr[data-seq="7"]`)))
	title, settings, counts, messages := text(`#entity-title`), text(`#entity-props`), text(`#entity-counts`), text(`#entity-messages tbody`)
	if title != "Queue orders" || !strings.Contains(settings, "lock duration\t30.0 s") || !strings.Contains(settings, "max delivery count\t3") ||
		!strings.Contains(settings, "requires session\tno") || !strings.Contains(settings, "default ttl\tnone") {
		t.Errorf("the entity page shows %q with settings %q", title, settings)
	}
	for _, want := range []string{"active\t2", "expired\t1", "in flight\t1", "scheduled\t1", "deferred\t1", "dead-lettered\t1"} {
		if !strings.Contains(counts, want) {
			t.Errorf("the counts %q lack %q", counts, want)
		}
	}
	states, err := chromedp.Run(bctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("#entity-messages tbody tr")].map((r) => r.dataset.seq + ":" + r.dataset.state).join(" ")`))
	if err != nil || states != "1:deferred 2:locked 4:active 5:active 6:scheduled 7:expired" {
		t.Errorf("the messages' states: %q, %v (rows %q)", states, err, messages)
	}
	// The counts over time, as the server sampled them (TestDashboardHistory
	// checks the samples), and the rates.
	drawn, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#entity-chart svg, #entity-rates svg")].map((svg) =>
		[...svg.querySelectorAll("polyline")].map((l) => l.getAttribute("class")).join(",") + " " +
			svg.querySelector("text.caption").textContent).join("; ")`))
	if err != nil || !regexp.MustCompile(`^active,inFlight,scheduled,deferred,deadLettered,expired peak \d+ messages over \d+ samples, `+
		`sampled by the server every 200 ms; sent,received,settled peak [\d.]+ msg/s over \d+ samples, through this server, sampled by `+
		`the server every 200 ms$`).MatchString(drawn) {
		t.Errorf("the counts and rates over time: %q, %v", drawn, err)
	}
	if locked := text(`#entity-messages tr[data-seq="2"] td:nth-child(7)`); locked == "" {
		t.Errorf("the locked message shows no lock expiry: %q", messages)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("dashboard: screenshot: %v", err)
	}
	checkShot(t, shot)
	if err := os.WriteFile(artifact(t, "dashboard-entity.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// A message's detail.
	do("a message's detail", chromedp.Click(chromedp.CSS(`#entity-messages tbody tr[data-seq="4"] td:nth-child(3)`)),
		chromedp.WaitVisible(chromedp.CSS(`#message-detail`)))
	if detail := text(`#message-detail`); !strings.Contains(detail, "Message #4") || !strings.Contains(detail, "message id\tm-4") ||
		!strings.Contains(detail, "subject\torder") || !strings.Contains(detail, "property size\tL") || !strings.Contains(detail, "pizza") {
		t.Errorf("the detail of message 4 shows %q", detail)
	}

	// Find (on the server) by message id, by subject, by property.
	find := func(by, what string) string {
		t.Helper()
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(async () => { document.getElementById("entity-find-by").value = "`+by+
			`"; document.getElementById("entity-find").value = "`+what+`"; await browse();
			return [...document.querySelectorAll("#entity-messages tbody tr")].map((r) => r.dataset.seq).join(" "); })()`,
			chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("dashboard: find %s %q: %v", by, what, err)
		}
		return got
	}
	for _, c := range []struct{ by, what, want string }{
		{"messageId", "m-4", "4"}, {"subject", "order", "4"}, {"correlationId", "order", ""}, {"property", "size=L", "4"},
		{"property", "size=S", ""}, {"messageId", "", "1 2 4 5 6 7"},
	} {
		if got := find(c.by, c.what); got != c.want {
			t.Errorf("finding %s %q shows messages %q, want %q", c.by, c.what, got, c.want)
		}
	}
	if find("property", "size"); !strings.Contains(text(`#entity-page`), "key=value") {
		t.Errorf("finding a property without a value says %q", text(`#entity-page`))
	}
	find("messageId", "")

	// A queue of sessions: its messages found by session, each showing
	// its session in its detail.
	if _, err := lib.CreateQueue(ctx, "carts", &sluice.QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	carts, _ := lib.NewSender("carts")
	if _, err := carts.SendBatch(ctx, []*sluice.Message{{Body: []byte("apple"), SessionID: "alice"}, {Body: []byte("bread"), SessionID: "bob"},
		{Body: []byte("cheese"), SessionID: "alice"}}); err != nil {
		t.Fatal(err)
	}
	do("the sessions' queue", chromedp.Navigate(e.URL+"/#entity/carts"), chromedp.WaitVisible(chromedp.CSS(`#entity-messages tr[data-seq="3"]`)))
	if got := find("sessionId", "alice"); got != "1 3" {
		t.Errorf("finding session alice shows messages %q, want 1 3", got)
	}
	do("a session message's detail", chromedp.Click(chromedp.CSS(`#entity-messages tbody tr[data-seq="3"] td:nth-child(3)`)),
		chromedp.WaitVisible(chromedp.CSS(`#message-detail`)))
	if detail := text(`#message-detail`); !strings.Contains(detail, "session id\talice") || !strings.Contains(detail, "cheese") {
		t.Errorf("the detail of a session's message shows %q", detail)
	}
	do("back to orders", chromedp.Navigate(e.URL+"/#entity/orders"), chromedp.WaitVisible(chromedp.CSS(`#entity-messages tr[data-seq="7"]`)))

	// Delete selected messages, confirmed: the locked one stays.
	do("delete an active and a locked message", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`#entity-messages input[value="5"]`)), chromedp.Click(chromedp.CSS(`#entity-messages input[value="2"]`)),
		chromedp.Click(chromedp.CSS(`#entity-delete`)))
	wait("the delete", `document.getElementById("entity-result").textContent.startsWith("deleted 1 of 2 message(s)")`)
	if ms, err := r.Peek(ctx, 10, &sluice.PeekOptions{FromSequenceNumber: 1}); err != nil || len(ms) != 5 || ms[1].SequenceNumber != 2 || ms[2].SequenceNumber != 4 {
		t.Fatalf("after the dashboard deleted #5 and (locked) #2: %v, %v", ms, err)
	}

	// Browse by state; cancel the scheduled message, confirmed.
	choose("MESSAGE_STATE_SCHEDULED")
	wait("only the scheduled message", `document.querySelectorAll("#entity-messages tbody tr").length === 1 && !!document.querySelector('#entity-messages tr[data-seq="6"]')`)
	do("refuse the confirmation", chromedp.Evaluate[chromedp.Void](`window.confirm = () => false`),
		chromedp.Click(chromedp.CSS(`#entity-messages input[value="6"]`)), chromedp.Click(chromedp.CSS(`#entity-cancel`)))
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.Scheduled != 1 {
		t.Fatalf("a refused confirmation cancelled: %+v, %v", st, err)
	}
	do("confirm", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.CSS(`#entity-cancel`)))
	wait("the cancel", `document.getElementById("entity-result").textContent === "cancelled 1 scheduled message(s)"`)
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.Scheduled != 0 {
		t.Fatalf("after the dashboard cancelled the scheduled message: %+v, %v", st, err)
	}

	// The dead letters: resubmitted, then (after another) purged.
	choose("dead")
	wait("the dead letter", `!!document.querySelector('#entity-messages tr[data-seq="3"][data-state="dead-lettered"]')`)
	do("resubmit it, confirmed", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`#entity-messages input[value="3"]`)), chromedp.Click(chromedp.CSS(`#entity-resubmit`)))
	wait("the resubmit", `document.getElementById("entity-result").textContent === "resubmitted 1 dead letter(s)"`)
	m, err := r.Receive(ctx, 2)
	if err != nil || len(m) != 2 {
		t.Fatalf("Receive = %v, %v", m, err)
	}
	for _, msg := range m {
		if err := r.DeadLetter(ctx, msg, &sluice.DeadLetterOptions{Reason: "again"}); err != nil {
			t.Fatal(err)
		}
	}
	// One deleted by its number, confirmed.
	keep, gone := m[0].SequenceNumber, m[1].SequenceNumber
	choose("dead")
	wait("the two dead letters", `document.querySelectorAll('#entity-messages tr[data-state="dead-lettered"]').length === 2`)
	if reasons := text(`#entity-reason`); !strings.Contains(reasons, "any reason (2)") || !strings.Contains(reasons, "again (2)") {
		t.Errorf("the reasons to choose from: %q", reasons)
	}
	do("delete one", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#entity-messages input[value="%d"]`, gone))), chromedp.Click(chromedp.CSS(`#entity-delete`)))
	wait("the delete", `document.getElementById("entity-result").textContent === "deleted 1 dead letter(s)"`)
	dlq, _ := lib.NewReceiver("orders", &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
	if left, err := dlq.Peek(ctx, 10, &sluice.PeekOptions{FromSequenceNumber: 1}); err != nil || len(left) != 1 || left[0].SequenceNumber != keep {
		t.Fatalf("dead letters after the dashboard deleted #%d: %v, %v", gone, left, err)
	}
	do("reload the page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#entity-counts tr[data-count="dead-lettered"]`)))
	wait("the dead letter counted", `document.querySelector('#entity-counts tr[data-count="dead-lettered"]').textContent.endsWith("1")`)
	do("purge, confirmed", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), chromedp.Click(chromedp.CSS(`#entity-purge`)))
	wait("the purge", `document.getElementById("entity-result").textContent === "purged 1 dead letter(s)"`)
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.DeadLettered != 0 {
		t.Fatalf("after the dashboard purged: %+v, %v", st, err)
	}
	// Every message no lock holds, purged, confirmed.
	wait("the purge's button", `!document.getElementById("entity-purge-messages").disabled`)
	do("purge the messages, confirmed", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`#entity-purge-messages`)))
	wait("the purge of messages", `/^purged \d+ message\(s\)$/.test(document.getElementById("entity-result").textContent)`)
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.Active+st.Deferred+st.Scheduled+st.Expired != 0 {
		t.Fatalf("after the dashboard purged the messages: %+v, %v", st, err)
	}

	// From the entities view a click opens a subscription's page, its
	// rules shown, and the URL names it.
	if _, err := lib.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateSubscription(ctx, "events", "audit", nil, sluice.Rule{Name: "vip", Filter: sluice.SQLFilter{Expression: "tier = 'gold'"}}); err != nil {
		t.Fatal(err)
	}
	do("the entities view", chromedp.Navigate(e.URL+"/#entities"),
		chromedp.WaitVisible(chromedp.CSS(`#entities-table tr[data-entity="events/Subscriptions/audit"]`)),
		chromedp.Click(chromedp.CSS(`#entities-table tr[data-entity="events/Subscriptions/audit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#entity-rules li[data-rule="vip"]`)))
	url, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.hash`))
	if err != nil || url != "#entity/events%2FSubscriptions%2Faudit" {
		t.Errorf("the subscription's page is at %q, %v", url, err)
	}
	if rules := text(`#entity-rules`); rules != "rule vip: tier = 'gold'" {
		t.Errorf("the subscription's rules: %q", rules)
	}
	// Back goes back to the entities, and adds no entry of its own (a
	// URL that names nothing is rewritten, not pushed).
	entries, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`history.length`))
	if err != nil {
		t.Fatal(err)
	}
	do("back", chromedp.Evaluate[chromedp.Void](`history.back()`), chromedp.WaitVisible(chromedp.CSS(`#view-entities`)))
	wait("the entities' URL", `location.hash === "#entities"`)
	if after, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`history.length`)); err != nil || after != entries {
		t.Errorf("history holds %v entries after back, %v before (%v)", after, entries, err)
	}
}

// checkShot fails unless png is a screenshot of a rendered page: a PNG
// of the browser window's width at least (wide tables widen a page)
// whose pixels are not all of one colour.
func checkShot(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 1280 || b.Dy() < 400 {
		t.Fatalf("screenshot of %dx%d", b.Dx(), b.Dy())
	}
	colours := map[[3]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
		}
	}
	if len(colours) < 8 {
		t.Fatalf("screenshot holds %d colours: a blank page?", len(colours))
	}
}

// The streams view lists each subscription with its consumer, whether a
// live processor serves it, its lag and its fault; it shows a
// subscription's parked events, replays them (here refused: no Consume
// stream of the consumer is open on this server) and clears a fault,
// confirmed.
func TestDashboardStreamSubscriptions(t *testing.T) {
	path := chromium(t)
	e := servertest.Start(t, "sqlite", server.Config{})
	ctx := t.Context()
	var broken atomic.Bool
	broken.Store(true)
	p := e.Lib.NewStreamProcessor(&sluice.StreamProcessorOptions{HeartbeatInterval: 100 * time.Millisecond, ProgressInterval: 100 * time.Millisecond})
	p.Handle("pager", func(context.Context, *sluice.StreamEvent) error {
		if broken.Load() {
			return errors.New("pager down")
		}
		return nil
	}, &sluice.ConsumerOptions{Namespace: "ops", MaxAttempts: 1, OnFailure: sluice.FaultOnFailure})
	p.Handle("parker", func(context.Context, *sluice.StreamEvent) error { return errors.New("parker down") },
		&sluice.ConsumerOptions{Namespace: "ops", MaxAttempts: 1})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.WithoutCancel(ctx))
	if _, err := e.Lib.Publish(ctx, sluice.StreamID{Namespace: "ops", Key: "disk"}, sluice.Event{Body: []byte("disk full")}); err != nil {
		t.Fatal(err)
	}
	pager, parker := "ns/ops/pager", "ns/ops/parker"
	deadline := time.Now().Add(20 * time.Second)
	for {
		sub, err := e.Lib.GetStreamSubscription(ctx, pager)
		parked, perr := e.Lib.ParkedEvents(ctx, parker, 10)
		if err == nil && perr == nil && sub.Fault != "" && len(parked) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fault and parked event after 20s: %+v %v, %v %v", sub, err, parked, perr)
		}
		time.Sleep(50 * time.Millisecond)
	}

	bctx := newBrowser(t, path)
	pg := page{t, bctx}
	run, wait, text := pg.run, pg.wait, pg.text
	if err := chromedp.Do(bctx, chromedp.Navigate(e.URL+"/#streams"),
		chromedp.WaitVisible(chromedp.CSS(`#stream-subs-table tr[data-subscription="ns/ops/pager"]`))); err != nil {
		t.Fatalf("dashboard: the streams view's subscriptions: %v", err)
	}
	if row := text(`#stream-subs-table tr[data-subscription="ns/ops/pager"]`); !strings.HasPrefix(row, "pager\tops/*\tns/ops/pager\tyes\t") ||
		!strings.Contains(row, "pager down") || !strings.Contains(row, "Clear fault") {
		t.Errorf("pager's row: %q", row)
	}
	run("parker's parked events", `document.querySelector('#stream-subs-table tr[data-subscription="ns/ops/parker"] button[data-action="parked"]').click()`)
	wait("the parked event", `!!document.querySelector("#parked-table tr[data-position]")`)
	if parked := text(`#parked-table tbody`); !strings.Contains(parked, "ops/disk") || !strings.Contains(parked, "parker down") ||
		!strings.Contains(parked, "disk full") {
		t.Errorf("parker's parked events: %q", parked)
	}
	run("replay", `document.getElementById("parked-replay").click()`)
	wait("the replay's answer", `document.getElementById("parked-result").textContent.startsWith("replay failed")`)
	if got := text(`#parked-result`); !strings.Contains(got, "no Consume stream") {
		t.Errorf("a replay with no Consume stream on the server says %q", got)
	}

	broken.Store(false)
	run("clear pager's fault, confirmed", `window.confirm = () => true;
		document.querySelector('#stream-subs-table tr[data-subscription="ns/ops/pager"] button[data-action="clear-fault"]').click()`)
	wait("the clear", `document.getElementById("stream-sub-result").textContent === "cleared the fault of ns/ops/pager"`)
	deadline = time.Now().Add(20 * time.Second)
	for {
		sub, err := e.Lib.GetStreamSubscription(ctx, pager)
		if err == nil && sub.Fault == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pager still faulted after the dashboard cleared it: %+v, %v", sub, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
