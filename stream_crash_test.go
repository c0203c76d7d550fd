package sluice_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/store"
)

// Environment of the consumer child process of TestStreamAtLeastOnceAcrossKill.
const (
	crashChildDSN     = "SLUICE_STREAM_CHILD_DSN"
	crashChildService = "SLUICE_STREAM_CHILD_SERVICE"
	crashChildOut     = "SLUICE_STREAM_CHILD_OUT"
)

// TestStreamCrashChild is the consumer process: it appends "key position"
// to a file for every delivery, until SIGTERM stops it gracefully. It
// runs only as the child of TestStreamAtLeastOnceAcrossKill.
func TestStreamCrashChild(t *testing.T) {
	dsn := os.Getenv(crashChildDSN)
	if dsn == "" {
		t.Skip("runs only as the child process of TestStreamAtLeastOnceAcrossKill")
	}
	runChildProcessor(t, dsn, os.Getenv(crashChildService), os.Getenv(crashChildOut), nil,
		sluice.StreamProcessorOptions{ProgressInterval: 50 * time.Millisecond},
		sluice.ConsumerOptions{Namespace: "crash"},
		func(_ context.Context, _ *sluice.StreamProcessor, ev *sluice.StreamEvent) (string, error) {
			return fmt.Sprintf("%s %d\n", ev.Key, ev.Position), nil
		})
}

// runChildProcessor is the body of a child process of a test: a stream
// processor whose consumer "checker" handles each delivery with handle
// and appends the line it returns to the file at outPath (a write
// reaches the kernel at once: it survives a SIGKILL of the process), and
// "ready" once started, until SIGTERM stops it gracefully.
func runChildProcessor(t *testing.T, dsn, service, outPath string, log *slog.Logger, opts sluice.StreamProcessorOptions,
	consumer sluice.ConsumerOptions, handle func(ctx context.Context, p *sluice.StreamProcessor, ev *sluice.StreamEvent) (string, error)) {
	ctx := context.Background()
	c, err := sluice.Open(ctx, dsn, &sluice.Options{Service: service, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := os.OpenFile(outPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var mu sync.Mutex
	p := c.NewStreamProcessor(&opts)
	err = p.Handle("checker", func(ctx context.Context, ev *sluice.StreamEvent) error {
		line, err := handle(ctx, p, ev)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		_, err = out.WriteString(line)
		return err
	}, &consumer)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	fmt.Fprintln(out, "ready")
	mu.Unlock()
	<-stop
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Stop(sctx); err != nil {
		t.Fatal(err)
	}
}

// A consumer process killed with SIGKILL while a producer publishes, then
// restarted, has been delivered every published event; the duplicates
// are only events delivered after the last progress it stored before the
// kill (in flight at the kill), and they are counted.
func TestStreamAtLeastOnceAcrossKill(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		dsn := shared.DSN(kind)
		outPath := filepath.Join(t.TempDir(), "delivered")
		start := func() *exec.Cmd {
			t.Helper()
			cmd := exec.Command(os.Args[0], "-test.run=^TestStreamCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashChildDSN+"="+dsn, crashChildService+"="+service, crashChildOut+"="+outPath)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			readies := strings.Count(readFile(t, outPath), "ready\n")
			deadline := time.Now().Add(30 * time.Second)
			for strings.Count(readFile(t, outPath), "ready\n") == readies {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the consumer process did not start")
				}
				time.Sleep(20 * time.Millisecond)
			}
			return cmd
		}
		os.WriteFile(outPath, nil, 0o644)
		child := start()
		defer func() { child.Process.Kill(); child.Wait() }()

		// The producer: 100 streams, 40 events each, 10 at a time.
		const streams, perStream = 100, 40
		published := make(map[string]bool)
		var mu sync.Mutex
		done := make(chan struct{})
		go func() {
			defer close(done)
			for round := range perStream / 10 {
				for s := range streams {
					key := "s-" + strconv.Itoa(s)
					evs := make([]sluice.Event, 10)
					for i := range evs {
						evs[i] = sluice.Event{Body: []byte(strconv.Itoa(round*10 + i))}
					}
					pos, err := c.Publish(ctx, sluice.StreamID{Namespace: "crash", Key: key}, evs...)
					if err != nil {
						t.Errorf("Publish: %v", err)
						return
					}
					mu.Lock()
					for _, p := range pos {
						published[fmt.Sprintf("%s %d", key, p)] = true
					}
					mu.Unlock()
					time.Sleep(time.Millisecond)
				}
			}
		}()

		// Kill the consumer in the middle of it (once it has delivered some,
		// however slow the machine), and note the progress it stored.
		for wait := time.Now().Add(30 * time.Second); len(deliveries(t, outPath)) < 100; {
			if time.Now().After(wait) {
				t.Fatalf("the consumer delivered %d events in 30 s", len(deliveries(t, outPath)))
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		child.Wait()
		st, err := shared.Backend(t, kind).Store(store.Tenant{Service: service, Provider: sluice.DefaultProvider})
		if err != nil {
			t.Fatal(err)
		}
		saved := make(map[int32]int64)
		for p := range int32(16) {
			pp, err := st.Progress(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			saved[p] = pp.Positions["ns/crash/checker"]
		}
		beforeKill := len(deliveries(t, outPath))
		child = start()
		<-done
		mu.Lock()
		want := len(published)
		mu.Unlock()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got := deliveries(t, outPath)
			missing := 0
			for ev := range published {
				if got[ev] == 0 {
					missing++
				}
			}
			if missing == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d published events never delivered", missing, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		child.Process.Signal(syscall.SIGTERM)
		if err := child.Wait(); err != nil {
			t.Fatalf("the consumer process did not stop cleanly: %v", err)
		}
		dups := 0
		for ev, n := range deliveries(t, outPath) {
			if n == 1 {
				continue
			}
			dups += n - 1
			key, posText, _ := strings.Cut(ev, " ")
			pos, _ := strconv.ParseInt(posText, 10, 64)
			part := sluice.PartitionOf(sluice.StreamID{Namespace: "crash", Key: key}, 16)
			if pos <= saved[part] || n > 2 {
				t.Fatalf("event %s delivered %d times, though its partition's stored progress was %d at the kill", ev, n, saved[part])
			}
		}
		if beforeKill == 0 || beforeKill >= want {
			t.Fatalf("%d of %d events were delivered before the kill: the kill did not land mid-stream", beforeKill, want)
		}
		t.Logf("%d events: %d delivered before the kill, %d delivered twice (after the progress stored before the kill)", want, beforeKill, dups)
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// deliveries counts the deliveries the consumer recorded, by event.
func deliveries(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make(map[string]int)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" || !strings.Contains(line, " ") {
			continue // a line cut short by the kill is not a delivery
		}
		out[line]++
	}
	return out
}

// A subscription's stored position is its resume hint. One missing on a
// partition (a namespace subscription created without it) resumes from
// the partition's checkpoint, which no subscription's position is
// below: its events there arrive (none is lost; at worst some come
// again), and the first save stores its position.
func TestStreamMissingResumeHint(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		const ns, consumer = "hint", "c"
		id := sluice.StreamID{Namespace: ns, Key: "k"}
		n := c.StreamPartitions()
		part := sluice.PartitionOf(id, n)
		st := tenantStore(t, kind, service)
		if _, err := st.StreamPartitions(ctx, n); err != nil {
			t.Fatal(err)
		}
		start := make(map[int32]int64)
		for p := range n {
			if p != part {
				start[p] = 0
			}
		}
		sub := store.NewSubscription{ID: stream.ImplicitID(ns, consumer), Consumer: consumer, Namespace: ns,
			Partition: store.NoPartition, Start: start}
		if err := st.CreateSubscription(ctx, &sub); err != nil {
			t.Fatal(err)
		}
		pos := publish(t, c, id, "1", "2", "3")
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle(consumer, col.handle, &sluice.ConsumerOptions{Namespace: ns})
		})
		col.waitCount(t, 3, 30*time.Second)
		if got := col.positions(sub.ID, id.Key); !slices.Equal(got, pos) {
			t.Fatalf("the subscription without a position on partition %d got %v, want %v", part, got, pos)
		}
		waitFor(t, 30*time.Second, "its position on the partition is not stored", func() (bool, string) {
			pp, err := st.Progress(ctx, part)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := pp.Positions[sub.ID]
			return ok && got == pos[2], fmt.Sprint(pp.Positions)
		})
	})
}
