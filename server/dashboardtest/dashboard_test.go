package dashboardtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

// chromium returns the path of a Chromium to drive: CHROMIUM, else the
// first one on PATH. Without one the test skips, except in CI.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found (install Debian's chromium package, or set CHROMIUM): CI must run the dashboard's browser test")
	}
	t.Skip("no Chromium found; install Debian's chromium package (or set CHROMIUM) to run the dashboard's browser test")
	return ""
}

// artifact returns where to keep a test's output file: under
// SLUICE_TEST_ARTIFACTS when set (.ci/run sets it), else in the test's
// temporary directory.
func artifact(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("SLUICE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// newBrowser starts headless Chromium for the test, for at most 90 s.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	bctx, cancelTimeout := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	return bctx
}

// page drives one browser tab for a test, failing the test on any error.
type page struct {
	t   *testing.T
	ctx context.Context
}

// do runs steps.
func (p page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("dashboard: %s: %v", what, err)
	}
}

// text is the text of the element css selects.
func (p page) text(css string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		p.t.Fatalf("dashboard: text of %s: %v", css, err)
	}
	return s
}

// wait polls until the expression is true.
func (p page) wait(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr)); err != nil {
		p.t.Fatalf("dashboard: waiting for %s: %v", what, err)
	}
}

// run evaluates js: one evaluation that finds and clicks, so that a
// refresh of the view between the two cannot take the node away.
func (p page) run(what, js string) {
	p.t.Helper()
	p.do(what, chromedp.Evaluate[chromedp.Void](js))
}

// On a server with keys the dashboard asks for a token, and shows the
// entities once given one.
func TestDashboardToken(t *testing.T) {
	path := chromium(t)
	const token = "dashboard-token-0123456789"
	e := servertest.Start(t, "sqlite", server.Config{Keys: []server.Key{{Name: "ops", Token: token,
		Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}}}})
	if _, err := e.Lib.CreateQueue(t.Context(), "orders", nil); err != nil {
		t.Fatal(err)
	}
	bctx := newBrowser(t, path)
	if err := chromedp.Do(bctx, chromedp.Navigate(e.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#login`))); err != nil {
		t.Fatalf("dashboard: the token form: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS(`#token`), token), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#entities-table tr[data-entity="orders"]`))); err != nil {
		t.Fatalf("dashboard: the entities after the token: %v", err)
	}
}

// The dashboard, end to end in headless Chromium: it lists the entities
// with their counts, the topics and subscriptions, the stream cluster's
// nodes and partitions and the server's throughput, and resubmits a dead
// letter; a screenshot of each view is kept.
func TestDashboard(t *testing.T) {
	path := chromium(t)
	e := servertest.Start(t, "sqlite", server.Config{})
	ctx := t.Context()
	lib := e.Lib
	if _, err := lib.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.CreateSubscription(ctx, "events", "audit", nil, sluice.Rule{Name: "vip", Filter: sluice.SQLFilter{Expression: "tier = 'gold'"}}); err != nil {
		t.Fatal(err)
	}
	// Through the API, so that the server's throughput counts them.
	c := e.Remote(t, nil)
	snd, _ := c.NewSender("orders")
	var msgs []*sluice.Message
	for i := range 5 {
		msgs = append(msgs, &sluice.Message{Body: []byte(fmt.Sprintf("order %d", i))})
	}
	if _, err := snd.SendBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	r, _ := c.NewReceiver("orders", nil)
	got, err := r.Receive(ctx, 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("Receive = %v, %v", got, err)
	}
	r.DeadLetter(ctx, got[0], &sluice.DeadLetterOptions{Reason: "OutOfStock", Description: "no pizza left"})
	r.Complete(ctx, got[1])
	// h holds the events of shop/stuck, so that their partition lags.
	stuck := make(chan struct{})
	p := lib.NewStreamProcessor(&sluice.StreamProcessorOptions{Name: "dash"})
	p.Handle("h", func(ctx context.Context, ev *sluice.StreamEvent) error {
		if ev.Key == "stuck" {
			select {
			case <-stuck:
			case <-ctx.Done():
			}
		}
		return nil
	}, &sluice.ConsumerOptions{Namespace: "shop"})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	defer close(stuck) // before Stop, which waits for the handler
	// Another group, for another consumer, pulls the partitions too.
	mail := lib.NewStreamProcessor(&sluice.StreamProcessorOptions{Name: "mailer", Group: "mailers"})
	mail.Handle("mail", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{Namespace: "shop"})
	if err := mail.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer mail.Stop(context.Background())
	for _, proc := range []*sluice.StreamProcessor{p, mail} {
		deadline := time.Now().Add(10 * time.Second)
		for len(proc.Stats()) < 16 {
			if time.Now().After(deadline) {
				t.Fatalf("%s pulls %d partitions", proc.NodeID(), len(proc.Stats()))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	stuckID := sluice.StreamID{Namespace: "shop", Key: "stuck"}
	if _, err := lib.Publish(ctx, stuckID, sluice.Event{Body: []byte("1")}, sluice.Event{Body: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	stuckPart := sluice.PartitionOf(stuckID, 16)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := lib.ClusterStatus(ctx)
		if err == nil && slices.ContainsFunc(st.Partitions, func(ps sluice.PartitionStatus) bool {
			return ps.Partition == stuckPart && ps.Head == 2 && ps.Checkpoint == 0 && ps.Lag == 2
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d does not lag by 2: %+v, %v", stuckPart, st.Partitions, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// ghost's subscription has no processor: the streams view says so.
	if _, err := lib.Subscribe(ctx, sluice.StreamID{Namespace: "shop", Key: "haunted"}, "ghost", sluice.FromNow()); err != nil {
		t.Fatal(err)
	}

	bctx := newBrowser(t, path)

	do, text := page{t, bctx}.do, page{t, bctx}.text
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("dashboard: screenshot: %v", err)
		}
		file := artifact(t, "dashboard-"+name+".png")
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the %s view: %s", name, file)
	}
	view := func(name, ready string) {
		t.Helper()
		do("the "+name+" view", chromedp.Click(chromedp.CSS(`nav button[data-view="`+name+`"]`)), chromedp.WaitVisible(chromedp.CSS(ready)))
	}

	do("open the page", chromedp.Navigate(e.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#entities-table tr[data-entity="orders"]`)))
	entities := text(`#entities-table tbody`)
	shot("entities")
	view("topics", `.topic[data-topic="events"]`)
	topics := text(`#topics-list`)
	view("streams", `#partitions-table tbody tr:nth-child(16)`)
	partitions, nodes := text(`#partitions-table tbody`), text(`#nodes-table tbody`)
	if unserved := text(`#unserved`); !strings.HasPrefix(unserved, "No live processor serves ghost:") {
		t.Errorf("the streams view's warning of consumers no processor serves: %q", unserved)
	}
	if !strings.Contains(partitions, "ghost · shop/haunted (0)") {
		t.Errorf("the streams view does not name ghost's subscription:\n%s", partitions)
	}
	shot("streams")
	view("throughput", `#throughput-chart svg polyline.sent`)
	chart, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`#throughput-chart svg text`)))
	if err != nil {
		t.Fatalf("dashboard: the chart's label: %v", err)
	}
	// Time ticks once there are samples (one every bucket), a note before.
	axes, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => { const q = (s) => document.querySelectorAll("#throughput-chart svg " + s);
		return q("text.rate-tick").length + " rate ticks, time ticks: " + (q("text.time-tick").length > 0 || q("text.empty").length === 1) +
			", unit: " + [...q("text")].some((t) => t.textContent === "msg/s"); })()`))
	if err != nil {
		t.Fatalf("dashboard: the chart's axes: %v", err)
	}
	shot("throughput")
	drawn, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => {
		const svg = chart([{ at: "2026-01-01T00:00:00Z", sent: 3 }, { at: "2026-01-01T00:00:10Z", sent: 7, received: 2 }]);
		return svg.querySelectorAll("text.time-tick").length + " " + [...svg.querySelectorAll("text.rate-tick")].map((t) => t.textContent).join(","); })()`))
	if err != nil || drawn != "3 0,5,10" {
		t.Errorf("a chart of two samples peaking at 7/s: %q, %v; want 3 time ticks and rate ticks 0,5,10", drawn, err)
	}
	view("deadletters", `#dlq-table tbody tr[data-seq]`)
	dead := text(`#dlq-table tbody`)
	shot("deadletters")
	do("resubmit the dead letter, confirmed", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(`#dlq-table tbody input[type=checkbox]`)), chromedp.Click(chromedp.CSS(`#dlq-resubmit-selected`)))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("dlq-progress").textContent.startsWith("resubmitted")`)); err != nil {
		t.Fatalf("dashboard: waiting for the resubmit: %v", err)
	}
	progress := text(`#dlq-progress`)
	// Reposition h's subscription to the head from the streams view: an
	// empty position is refused, then the head is taken and recorded.
	view("streams", `#partitions-table tbody tr:nth-child(16)`)
	do("reposition to no position", chromedp.SendKeys(chromedp.CSS(`#reposition-sub`), "ns/shop/h"),
		chromedp.SetValue(chromedp.CSS(`#reposition-to`), "REPOSITION_TARGET_POSITION"), chromedp.Click(chromedp.CSS(`#reposition button[type=submit]`)))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("reposition-result").textContent.startsWith("reposition failed")`)); err != nil {
		t.Fatalf("dashboard: waiting for the refused reposition: %v", err)
	}
	refused := text(`#reposition-result`)
	do("reposition to the head", chromedp.SetValue(chromedp.CSS(`#reposition-to`), "REPOSITION_TARGET_HEAD"),
		chromedp.Click(chromedp.CSS(`#reposition button[type=submit]`)))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("reposition-status").textContent.includes("reposition(s)")`)); err != nil {
		t.Fatalf("dashboard: waiting for the reposition: %v", err)
	}
	repositioned, status := text(`#reposition-result`), text(`#reposition-status`)
	shot("reposition")
	if !strings.Contains(refused, "position") {
		t.Errorf("a reposition to no position shows %q", refused)
	}
	if !strings.HasPrefix(repositioned, "repositioned to the head") || !strings.Contains(repositioned, fmt.Sprintf("partition %d: 0 → 2", stuckPart)) ||
		!strings.Contains(status, "ns/shop/h: 1 reposition(s)") {
		t.Errorf("the reposition shows %q and %q", repositioned, status)
	}
	if sub, err := lib.GetStreamSubscription(ctx, "ns/shop/h"); err != nil || sub.Repositions != 1 || sub.LastReposition == nil ||
		sub.LastReposition.To != "head" || sub.LastReposition.ToPositions[stuckPart] != 2 {
		t.Errorf("after the dashboard repositioned it: %+v, %v", sub, err)
	}
	// orders: 5 sent, 1 completed, 1 dead-lettered: 3 active, 1 dead letter.
	if !regexp.MustCompile(`orders\tqueue\t3\t0\t0\t0\t0\t1\t\d+\.\d s`).MatchString(entities) ||
		!strings.Contains(entities, "events/Subscriptions/audit\tsubscription") {
		t.Errorf("the entities view shows %q, want orders' counts and its oldest message's age", entities)
	}
	// The stuck partition: held, head 2, checkpoint 0, lag 2, and the
	// lag of h's subscription.
	stuckRow := regexp.MustCompile(fmt.Sprintf(`(?m)^%d\t[^\t]*%s[^\t]*\t\d+\tyes\t2\t0\t2\t.*h · shop/\* \(2\)`, stuckPart, p.NodeID()))
	if !stuckRow.MatchString(partitions) {
		t.Errorf("the streams view does not show partition %d lagging by 2:\n%s", stuckPart, partitions)
	}
	if !strings.Contains(topics, "audit vip: tier = 'gold'") {
		t.Errorf("the topics view shows %q", topics)
	}
	if !strings.Contains(nodes, p.NodeID()) || strings.Count(partitions, p.NodeID()) != 16 ||
		!strings.Contains(nodes, "mailers\tmail\t") || strings.Count(partitions, mail.NodeID()+" [mailers]") != 16 {
		t.Errorf("the streams view shows nodes %q and partitions %q", nodes, partitions)
	}
	if !strings.Contains(chart, "msg/s over") || !strings.Contains(chart, "samples") {
		t.Errorf("the throughput view shows %q", chart)
	}
	if axes != "3 rate ticks, time ticks: true, unit: true" {
		t.Errorf("the throughput chart's axes: %q", axes)
	}
	if !strings.Contains(dead, "OutOfStock") || !strings.Contains(dead, "no pizza left") || !strings.Contains(dead, "order 0") {
		t.Errorf("the dead-letter view shows %q", dead)
	}
	if progress != "resubmitted 1 of 1" {
		t.Errorf("resubmitting shows %q", progress)
	}
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.DeadLettered != 0 || st.Active != 4 {
		t.Errorf("after the dashboard resubmitted the dead letter: %+v, %v", st, err)
	}
}

// The streams view shows a consumer the server runs with its cache's
// windows (the head one marked *), splits, merges and the other
// counters, each window with its room, wanted records and pressure, and
// each of its subscriptions with its cursor and the window it reads:
// here one holds its first event in a lagging window while the other
// reads the head window.
func TestDashboardStreamCache(t *testing.T) {
	path := chromium(t)
	e := servertest.Start(t, "sqlite", server.Config{StreamNodes: servertest.CacheNodes()})
	l := servertest.StartLagging(t, e)
	bctx := newBrowser(t, path)
	row := fmt.Sprintf(`#consumers-table tr[data-consumer="reader"][data-partition="%d"]`, l.Partition)
	if err := chromedp.Do(bctx, chromedp.Navigate(e.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`nav button[data-view="streams"]`)),
		chromedp.Click(chromedp.CSS(`nav button[data-view="streams"]`)), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("dashboard: the streams view with reader's partition %d: %v", l.Partition, err)
	}
	text := page{t, bctx}.text
	partition := text(row)
	lease := text(fmt.Sprintf(`#partitions-table tr[data-partition="%d"]`, l.Partition))
	windowRows := text(`#cache-windows-table tbody`) // in one read, all of one refresh
	slow := text(fmt.Sprintf(`#consumer-subs-table tr[data-subscription="%s"]`, l.Slow.ID))
	fast := text(fmt.Sprintf(`#consumer-subs-table tr[data-subscription="%s"]`, l.Fast.ID))
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("dashboard: screenshot: %v", err)
	}
	file := artifact(t, "dashboard-stream-cache.png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the streams view: %s", file)

	// reader, partition, epoch, read, proposed and stored checkpoints,
	// cached; then windows, resident ranges (the head last, marked),
	// splits/merges, resets, rehydrated (empty without rehydration
	// reads), reads avoided/duplicate, reclaimed, retention gaps,
	// deliveries the lagging rate held.
	rng := `\d+-(?:\d+|\(empty\))`
	pm := regexp.MustCompile(`^reader\t` + fmt.Sprint(l.Partition) + `(?:\t[\d,]+){5}\t(\d+)\t((?:` + rng + ` )+` + rng + `\*)\t([1-9]\d*)/\d+` +
		`\t[\d,]+\t(?:[\d,]+ in [\d,]+ reads)?\t[\d,]+/[\d,]+\t[\d,]+\t[\d,]+\t[\d,]+$`).
		FindStringSubmatch(partition)
	if pm == nil {
		t.Fatalf("the streams view shows reader's partition %d as %q; want its windows, their ranges, a split", l.Partition, partition)
	}
	if n, _ := strconv.Atoi(pm[1]); n < 2 || strings.Count(pm[2], " ")+1 != n {
		t.Errorf("the streams view shows %s windows: %q", pm[1], pm[2])
	}
	checkWindowRows(t, windowRows, l.Partition)
	// The partitions table shows what the owner's cache holds, as its
	// last lease renewal stored it: some records, in a window or more.
	if !regexp.MustCompile(`^` + fmt.Sprint(l.Partition) + `\t[^\t]+\t[\d,]+\tyes(?:\t[\d,]+){3}\t[1-9][\d,]* in [1-9]\d*\t`).MatchString(lease) {
		t.Errorf("the streams view shows partition %d's lease as %q; want its owner's cached records and windows", l.Partition, lease)
	}
	// Slow reads the lagging window (the first), from before the event
	// it holds, which its cursor passed and its position did not; fast
	// reads the head window.
	sub := regexp.MustCompile(`^reader\t[\d,]+\t(\S+)\t([\d,]+)\t([\d,]+)\t[\d,]+\t(\d+): (\d+)-(?:\d+|\(empty\))(\*?)\t?$`)
	sm, fm := sub.FindStringSubmatch(slow), sub.FindStringSubmatch(fast)
	if sm == nil || fm == nil {
		t.Fatalf("the streams view shows the subscriptions as %q and %q", slow, fast)
	}
	if start, _ := strconv.ParseInt(sm[5], 10, 64); sm[1] != l.Slow.ID || sm[4] != "0" || sm[6] != "" || start > l.SlowAt ||
		fm[1] != l.Fast.ID || fm[6] != "*" {
		t.Errorf("the streams view shows the subscriptions as %q and %q; want slow in window 0 from %d at most, fast in the head window",
			slow, fast, l.SlowAt)
	}
	if pos, cur := shownInt(sm[2]), shownInt(sm[3]); pos >= l.SlowAt || cur < l.SlowAt {
		t.Errorf("the streams view shows slow at position %d, cursor %d; want the position below %d and the cursor at or past it",
			pos, cur, l.SlowAt)
	}
	if pos, cur := shownInt(fm[2]), shownInt(fm[3]); cur < pos {
		t.Errorf("the streams view shows fast's cursor %d behind its position %d", cur, pos)
	}
}

// shownInt reads a number the dashboard shows with thousands separators.
func shownInt(s string) int64 {
	n, _ := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n
}

// checkWindowRows checks the cache windows table's rows of reader's
// partition: two windows or more, by index, the head one last and
// marked, each with its records, bytes, members, room and wanted, and
// under pressure exactly when it wants records and has no room, and the
// one stream it reads, if any, of the shop namespace.
func checkWindowRows(t *testing.T, rows string, part int32) {
	t.Helper()
	row := regexp.MustCompile(`^reader\t` + fmt.Sprint(part) + `\t(\d+)\t(\d+-(?:\d+|\(empty\))\*?)(?:\t[\d,]+){3}\t([\d,]+)\t([\d,]+)\t(yes|no)\t?(.*)$`)
	var got [][]string
	for line := range strings.SplitSeq(rows, "\n") {
		if strings.HasPrefix(line, "reader\t"+fmt.Sprint(part)+"\t") {
			m := row.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("the streams view shows a window of reader's partition %d as %q", part, line)
			}
			got = append(got, m)
		}
	}
	if len(got) < 2 {
		t.Fatalf("the streams view shows %d windows of reader's partition %d: %q", len(got), part, rows)
	}
	for i, m := range got {
		head := strings.HasSuffix(m[2], "*")
		room, wanted := shownInt(m[3]), shownInt(m[4])
		if m[1] != fmt.Sprint(i) || head != (i == len(got)-1) || (m[5] == "yes") != (wanted > 0 && room == 0) ||
			m[6] != "" && !strings.HasPrefix(m[6], "shop/") {
			t.Errorf("the streams view shows window %d of %d as %q", i, len(got), m[0])
		}
	}
}
