package dashboardtest

import (
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/server/internal/servertest"
)

// The dead-letters view counts an entity's dead letters by reason, the
// most first, shows those of one reason, and resubmits or purges every
// dead letter of a reason, confirmed.
func TestDashboardDeadLettersByReason(t *testing.T) {
	path := chromium(t)
	e := servertest.Start(t, "sqlite", server.Config{})
	ctx := t.Context()
	lib := e.Lib
	if _, err := lib.CreateQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	snd, _ := lib.NewSender("orders")
	var batch []*sluice.Message
	for _, body := range []string{"a1", "b1", "a2", "none", "a3", "b2"} {
		batch = append(batch, &sluice.Message{Body: []byte(body)})
	}
	if _, err := snd.SendBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	r, _ := lib.NewReceiver("orders", nil)
	got, err := r.Receive(ctx, 6)
	if err != nil || len(got) != 6 {
		t.Fatalf("Receive = %d, %v", len(got), err)
	}
	for _, m := range got {
		reason := map[byte]string{'a': "OutOfStock", 'b': "Burnt", 'n': ""}[m.Body[0]]
		if err := r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}

	bctx := newBrowser(t, path)
	pg := page{t, bctx}
	run, wait, text := pg.run, pg.wait, pg.text
	pg.do("open the dead letters", chromedp.Navigate(e.URL+"/#deadletters"),
		chromedp.WaitVisible(chromedp.CSS(`#dlq-reasons tr[data-reason="Burnt"]`)))
	if reasons := text(`#dlq-reasons tbody`); !strings.HasPrefix(reasons, "OutOfStock\t3\t") ||
		!strings.Contains(reasons, "\nBurnt\t2\t") || !strings.Contains(reasons, "\n(no reason)\t1\t") {
		t.Errorf("the reasons: %q", reasons)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	checkShot(t, shot)
	if err := os.WriteFile(artifact(t, "dashboard-deadletters.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	// One reason's dead letters, found on the server.
	run("show Burnt", `document.querySelector('#dlq-reasons tr[data-reason="Burnt"] button[data-action="show"]').click()`)
	wait("Burnt's dead letters", `document.getElementById("dlq-list-title").textContent.endsWith("Burnt") &&
		[...document.querySelectorAll("#dlq-table tbody tr")].map((r) => r.dataset.seq).join(" ") === "2 6"`)
	run("show those without a reason", `document.querySelector('#dlq-reasons tr[data-reason=""] button[data-action="show"]').click()`)
	wait("the one without a reason", `[...document.querySelectorAll("#dlq-table tbody tr")].map((r) => r.dataset.seq).join(" ") === "4"`)

	// Burnt's resubmitted: refused first, then confirmed.
	run("resubmit Burnt, refused", `window.confirm = () => false;
		document.querySelector('#dlq-reasons tr[data-reason="Burnt"] button[data-action="resubmit"]').click()`)
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.DeadLettered != 6 {
		t.Fatalf("a refused confirmation resubmitted: %+v, %v", st, err)
	}
	run("resubmit Burnt, confirmed", `window.confirm = () => true;
		document.querySelector('#dlq-reasons tr[data-reason="Burnt"] button[data-action="resubmit"]').click()`)
	wait("the resubmit", `document.getElementById("dlq-progress").textContent === "resubmitted 2 dead letter(s) of Burnt"`)
	run("purge OutOfStock, confirmed", `window.confirm = () => true;
		document.querySelector('#dlq-reasons tr[data-reason="OutOfStock"] button[data-action="purge"]').click()`)
	wait("the purge", `document.getElementById("dlq-progress").textContent === "deleted 3 dead letter(s) of OutOfStock"`)
	wait("the reasons left", `[...document.querySelectorAll("#dlq-reasons tbody tr")].map((r) => r.dataset.reason).join("|") === ""`)
	reasons, err := lib.DeadLetterReasons(ctx, "orders")
	if err != nil || len(reasons) != 1 || reasons[""] != 1 {
		t.Errorf("the dead letters left by reason: %v, %v", reasons, err)
	}
	if st, err := lib.GetQueueStats(ctx, "orders"); err != nil || st.Active != 2 {
		t.Errorf("after resubmitting Burnt's 2: %+v, %v", st, err)
	}
}
