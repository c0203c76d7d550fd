package sluice_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Environment of the child process of TestPartitionedQueueAcrossKill.
const (
	partChildDSN     = "SLUICE_PARTITION_CHILD_DSN"
	partChildKind    = "SLUICE_PARTITION_CHILD_KIND"
	partChildService = "SLUICE_PARTITION_CHILD_SERVICE"
	partChildQueue   = "SLUICE_PARTITION_CHILD_QUEUE"
	partChildDir     = "SLUICE_PARTITION_CHILD_DIR"
)

// partChildKeys are the partition keys the child's keyed producers send
// under, each producer its own, in order.
const partChildProducers, partChildKeys = 4, 4

// lineLog appends lines to a file, one write each, so that a process
// killed mid-run leaves whole lines (and at most one cut short).
type lineLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lineLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, format+"\n", args...)
}

// TestPartitionCrashChild is the application process: keyed producers
// send, each its keys' messages in order, and an unkeyed one sends
// beside them, to a partitioned queue, logging each send once it
// returned (sent.log: "seq body"); a Processor with prefetch and batched
// completes handles them, logging each before it returns (handled.log).
// It runs, with several commit pipelines, until killed. It runs only as
// the child of TestPartitionedQueueAcrossKill.
func TestPartitionCrashChild(t *testing.T) {
	dsn := os.Getenv(partChildDSN)
	if dsn == "" {
		t.Skip("runs only as the child process of TestPartitionedQueueAcrossKill")
	}
	ctx := context.Background()
	opts := &sluice.Options{Service: os.Getenv(partChildService)}
	if os.Getenv(partChildKind) != "sqlite" {
		opts.MaxConns, opts.CommitPipelines = 8, 4
	}
	c, err := sluice.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	q, dir := os.Getenv(partChildQueue), os.Getenv(partChildDir)
	open := func(name string) *lineLog {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return &lineLog{f: f}
	}
	sent, handled := open("sent.log"), open("handled.log")
	p, err := c.NewProcessor(q, func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
		handled.add("%d %s", m.SequenceNumber, m.Body)
		return nil
	}, &sluice.ProcessorOptions{MaxConcurrent: 8, PrefetchCount: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	producer := func(keys []string) {
		s, err := c.NewSender(q)
		if err != nil {
			t.Error(err)
			return
		}
		for n := 0; ; n++ {
			for _, k := range keys {
				body := fmt.Sprintf("%s:%d", k, n)
				m := &sluice.Message{PartitionKey: k, Body: []byte(body)}
				if k == "" {
					body = "u:" + strconv.Itoa(n)
					m = &sluice.Message{Body: []byte(body)}
				}
				seq, err := s.Send(ctx, m)
				if err != nil {
					t.Error(err)
					return
				}
				sent.add("%d %s", seq, body)
			}
		}
	}
	for i := range partChildProducers {
		keys := make([]string, partChildKeys)
		for j := range keys {
			keys[j] = fmt.Sprintf("k%d", i*partChildKeys+j)
		}
		go producer(keys)
	}
	go producer([]string{""})
	select {} // until the parent kills the process
}

// readSeqLog reads "seq body" lines, skipping a last one cut short.
func readSeqLog(t *testing.T, path string) [][2]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		seq, body, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.Contains(body, ":") {
			continue
		}
		out = append(out, [2]string{seq, body})
	}
	return out
}

// A process that sends to and receives from a partitioned queue, through
// several commit pipelines, is killed mid-run: no acknowledged send is
// lost, every partition's numbers are gap-free (every number up to the
// highest was delivered: none skipped by a commit, none lost), a key's
// messages share a partition and are numbered in the order they were
// sent, and what is left is received in that order.
func TestPartitionedQueueAcrossKill(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{PartitionCount: 4, LockDuration: 2 * time.Second})
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestPartitionCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), partChildDSN+"="+shared.DSN(kind), partChildKind+"="+kind,
			partChildService+"="+service, partChildQueue+"="+q, partChildDir+"="+dir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Killed once it has sent and handled a fair share (more when the
		// machine is fast, the same checks either way).
		deadline := time.After(90 * time.Second)
		for len(readSeqLog(t, filepath.Join(dir, "sent.log"))) < 400 || len(readSeqLog(t, filepath.Join(dir, "handled.log"))) < 100 {
			select {
			case err := <-exited:
				t.Fatalf("the application process exited: %v", err)
			case <-deadline:
				cmd.Process.Kill()
				<-exited
				t.Fatal("the application process sent 400 and handled 100 messages not within 90 s")
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		sentLog := readSeqLog(t, filepath.Join(dir, "sent.log"))
		handledLog := readSeqLog(t, filepath.Join(dir, "handled.log"))

		// Drain what is left once the dead process's locks have ended
		// (before, a message it held would come after its key's later
		// ones, as a lock that ends allows).
		waitUntil(t, "the dead process's locks to end", func() bool {
			st, err := c.GetQueueStats(ctx, q)
			return err == nil && st.InFlight == 0
		})
		r := newReceiver(t, c, q, sluice.PeekLock)
		var drained []*sluice.ReceivedMessage
		waitUntil(t, "the queue drained", func() bool {
			ms, err := r.TryReceive(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) > 0 {
				if err := r.CompleteBatch(ctx, ms); err != nil {
					t.Fatal(err)
				}
				drained = append(drained, ms...)
				return false
			}
			st, err := c.GetQueueStats(ctx, q)
			return err == nil && st.Active == 0 && st.InFlight == 0 && st.Scheduled == 0
		})

		// Every message committed was handled (logged before its handler
		// returned, so before its completion) or drained.
		bySeq := map[int64]string{}
		note := func(seq int64, body, where string) {
			if b, ok := bySeq[seq]; ok && b != body {
				t.Errorf("sequence number %d is %q and %q (%s)", seq, b, body, where)
			}
			bySeq[seq] = body
		}
		for _, l := range handledLog {
			seq, _ := strconv.ParseInt(l[0], 10, 64)
			note(seq, l[1], "handled")
		}
		for _, m := range drained {
			note(m.SequenceNumber, string(m.Body), "drained")
		}
		keyPart := map[string]int64{}
		lastSeq := map[string]int64{}
		for _, l := range sentLog {
			seq, _ := strconv.ParseInt(l[0], 10, 64)
			if got, ok := bySeq[seq]; !ok || got != l[1] {
				t.Errorf("acknowledged send %q (sequence number %d) lost: delivered %q", l[1], seq, got)
			}
			key, _, _ := strings.Cut(l[1], ":")
			if key == "u" {
				continue
			}
			if p, ok := keyPart[key]; ok && p != seq>>48 {
				t.Errorf("key %s in partitions %d and %d", key, p, seq>>48)
			}
			keyPart[key] = seq >> 48
			if seq <= lastSeq[key] {
				t.Errorf("key %s: %q numbered %d after %d: not in the order sent", key, l[1], seq, lastSeq[key])
			}
			lastSeq[key] = seq
		}
		parts := map[int64][]int64{}
		for seq := range bySeq {
			parts[seq>>48] = append(parts[seq>>48], seq&(1<<48-1))
		}
		if len(parts) < 2 {
			t.Errorf("messages in %d partitions; want them spread", len(parts))
		}
		for p, own := range parts {
			slices.Sort(own)
			if own[0] != 1 || own[len(own)-1] != int64(len(own)) {
				t.Errorf("partition %d: %d numbers from %d to %d: a gap", p, len(own), own[0], own[len(own)-1])
			}
		}
		// What was left comes in each key's order.
		lastN := map[string]int{}
		for _, m := range drained {
			key, n, _ := strings.Cut(string(m.Body), ":")
			i, _ := strconv.Atoi(n)
			if prev, ok := lastN[key]; ok && key != "u" && i <= prev {
				t.Errorf("key %s: %d received after %d", key, i, prev)
			}
			lastN[key] = i
		}
		t.Logf("%d sends acknowledged, %d handled before the kill, %d drained after, %d partitions", len(sentLog), len(handledLog), len(drained), len(parts))
	})
}
