package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// startTail runs stream tail in the background and returns once it
// follows the log, with a function that waits for it to end and returns
// its exit code and output.
func startTail(t *testing.T, w where, args ...string) func() (int, string) {
	t.Helper()
	var stdout, stderr lockedBuffer
	exited := make(chan int, 1)
	noteRan(w.name, []string{"stream", "tail"})
	go func() {
		args := append(append([]string{"stream", "tail"}, args...), w.flags...)
		exited <- dispatch(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
	}()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(stderr.String(), "from now") {
		select {
		case code := <-exited:
			t.Fatalf("tail exited %d: %s", code, stderr.String())
		case <-deadline:
			t.Fatalf("tail did not start: %s", stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return func() (int, string) {
		t.Helper()
		select {
		case code := <-exited:
			return code, stdout.String()
		case <-time.After(10 * time.Second):
			t.Fatalf("tail did not stop; it printed %q", stdout.String())
			return 0, ""
		}
	}
}

// stream publish prints positions; stream tail prints the events of a
// namespace, or of one stream, published after it started: on a database
// and through a server alike.
func TestStreamPublishAndTail(t *testing.T) {
	t.Parallel()
	for _, w := range []where{
		{name: "sqlite", flags: []string{"--db", filepath.Join(t.TempDir(), "streams.db")}},
		{name: "server", flags: []string{"--server", startServer(t)}},
	} {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			testStreamPublishAndTail(t, w)
		})
	}
}

func testStreamPublishAndTail(t *testing.T, w where) {
	partition := func(key string) int32 { return sluice.PartitionOf(sluice.StreamID{Namespace: "orders", Key: key}, 16) }
	if out := w.ok(t, "stream", "publish", "orders", "order-1", "placed", "paid"); out != "1\n2\n" {
		t.Fatalf("publish printed %q", out)
	}
	pub := jsonLines(t, w.ok(t, "stream", "publish", "orders", "order-1", "shipped", "--json", "--property", "by=post"))
	if len(pub) != 1 || pub[0]["position"] != 3.0 || pub[0]["namespace"] != "orders" || pub[0]["key"] != "order-1" ||
		pub[0]["partition"] != float64(partition("order-1")) {
		t.Fatalf("publish --json: %v", pub)
	}
	want := "1\n"
	if partition("order-2") == partition("order-1") {
		want = "4\n"
	}
	if code, out, errOut := w.run(t, "from stdin", "stream", "publish", "orders", "order-2"); code != ExitOK || out != want {
		t.Fatalf("publish from stdin: exit %d, %q (want %q) %s", code, out, want, errOut)
	}

	wait := startTail(t, w, "orders", "--count", "3")
	w.ok(t, "stream", "publish", "orders", "order-1", "x", "--property", "k=v")
	w.ok(t, "stream", "publish", "other", "order-1", "not mine")
	w.ok(t, "stream", "publish", "orders", "order-9", "y", "z")
	code, out := wait()
	if code != ExitOK {
		t.Fatalf("tail --count 3 exited %d", code)
	}
	p1, p9 := partition("order-1"), partition("order-9")
	wantContains(t, "tail", out, fmt.Sprintf("[%d:", p1), " orders/order-1 20", " k=v: x\n", fmt.Sprintf("[%d:", p9), " orders/order-9 ", ": y\n", ": z\n")
	if n := strings.Count(out, "\n"); n != 3 || strings.Contains(out, "not mine") {
		t.Errorf("tail --count 3 printed %d lines:\n%s", n, out)
	}

	wait = startTail(t, w, "orders", "order-1", "--json", "--count", "1")
	w.ok(t, "stream", "publish", "orders", "order-2", "not this stream")
	w.ok(t, "stream", "publish", "orders", "order-1", "mine")
	code, out = wait()
	ev := jsonLines(t, out)
	if code != ExitOK || len(ev) != 1 || ev[0]["key"] != "order-1" || ev[0]["body"] != "mine" || ev[0]["partition"] != float64(p1) ||
		ev[0]["appendedAt"] == nil {
		t.Fatalf("tail of one stream: exit %d, %v", code, ev)
	}

	wait = startTail(t, w, "orders", "--for", "300ms")
	if code, out := wait(); code != ExitOK || out != "" {
		t.Fatalf("tail --for: exit %d, %q", code, out)
	}
}
