package storetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// CrashEnv tells CrashTest and EvictionOncePerInterval how to reach a
// backend's database from several processes.
type CrashEnv struct {
	// DSN names the database, in whatever form Open understands: a file
	// path for SQLite, a connection string for PostgreSQL or MySQL. The
	// parent passes it to the child in the environment; the child ignores
	// its own CrashEnv.DSN, so a DSN made from t.TempDir() works.
	DSN string
	// Open opens a Backend on the database dsn names and registers its
	// Close with t.Cleanup. The child calls it to do its work, the parent
	// to check the database after each crash.
	Open func(t *testing.T, dsn string) store.Backend
	// Rounds is how many times a child is started and killed
	// (default 3). Every round checks everything journaled so far.
	Rounds int
}

// Environment variables that make a test binary a crash child.
const (
	envCrashChild   = "SLUICE_STORETEST_CRASH_CHILD"
	envCrashDSN     = "SLUICE_STORETEST_CRASH_DSN"
	envCrashJournal = "SLUICE_STORETEST_CRASH_JOURNAL"
	envCrashService = "SLUICE_STORETEST_CRASH_SERVICE"
	envCrashRound   = "SLUICE_STORETEST_CRASH_ROUND"
	crashReady      = "storetest-crash-child-ready"
	crashQueue      = "crash"
	crashPartition  = 0
	crashSub        = "crash"
	crashNode       = "crash-child"
)

// CrashTest checks that a backend loses nothing it acknowledged when its
// process dies.
//
// It re-executes the test binary, running only the calling test, as a
// child process. The child opens the database named by env.DSN and loops:
// it enqueues batches, leases and completes messages, appends records to a
// partition log and, under the partition's lease, which it takes anew,
// saves its progress through the appended records (SaveProgress),
// recording each call that returned without error to a journal file
// that it fsyncs after the call returns. After a random 0.5 to 1.5 s of
// that the parent kills the child with SIGKILL, opens the database
// afresh with env.Open and checks that every enqueue that returned nil
// is there (still in the queue, or completed as the journal records),
// that nothing the journal records as completed is still in the queue,
// that every journaled record is at its position with a gap-free log
// around it, that the lease's epoch is no older than the last one
// acquired, and that the stored progress is no older than the last save
// acknowledged and no newer than the last one attempted. It does this
// env.Rounds times.
//
// The child runs the same test function and calls CrashTest again, which
// then does the child's work instead (and never returns), so wiring it in
// is one test:
//
//	func TestCrash(t *testing.T) {
//		storetest.CrashTest(t, storetest.CrashEnv{
//			DSN: filepath.Join(t.TempDir(), "crash.db"),
//			Open: func(t *testing.T, dsn string) store.Backend {
//				b, err := sqlite.Open(t.Context(), sqlite.Config{Path: dsn})
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { b.Close() })
//				return b
//			},
//		})
//	}
//
// Call it from the test function itself or a subtest, never from a
// goroutine, and do nothing in the test before it that the child must not
// repeat (the child runs everything before the call). A TestMain should
// use IsChild to skip setup the child does not need. CrashTest skips
// itself under -short.
func CrashTest(t *testing.T, env CrashEnv) {
	if env.Open == nil {
		t.Fatal("storetest: CrashEnv.Open is nil")
	}
	if IsChild() {
		crashChild(t, env)
		return
	}
	if testing.Short() {
		t.Skip("storetest: the crash test starts and kills processes; skipped in -short mode")
	}
	if env.DSN == "" {
		t.Fatal("storetest: CrashEnv.DSN is empty")
	}
	rounds := env.Rounds
	if rounds <= 0 {
		rounds = 3
	}
	ctx := t.Context()
	tn := newTenant()
	st, err := env.Open(t, env.DSN).Store(tn)
	if err != nil {
		t.Fatalf("Store: %v", err)
	}
	createQueue(t, ctx, st, store.QueueSettings{Name: crashQueue})
	if err := st.CreateSubscription(ctx, &store.NewSubscription{ID: crashSub, Consumer: "c", Namespace: rec("").Namespace,
		Key: rec("").Key, Partition: crashPartition, Start: map[int32]int64{crashPartition: 0}}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	journal := t.TempDir() + "/journal"

	var totals crashJournal
	for round := 1; round <= rounds; round++ {
		runCrashChild(t, env.DSN, tn, journal, round)
		totals = checkCrash(t, env, tn, journal, round)
	}
	t.Logf("storetest: %d crashes survived: %d enqueued, %d completed, %d records appended, progress saved through %d at epoch %d",
		rounds, len(totals.enqueued), len(totals.completed), len(totals.appended), totals.saved, totals.epoch)
	if len(totals.enqueued) == 0 || len(totals.completed) == 0 || len(totals.appended) == 0 || totals.saved == 0 {
		t.Fatalf("the children acknowledged too little to test anything: %d enqueues, %d completes, %d appends, progress through %d",
			len(totals.enqueued), len(totals.completed), len(totals.appended), totals.saved)
	}
}

// runCrashChild starts a child, waits until it is working, lets it work a
// random while and kills it.
func runCrashChild(t *testing.T, dsn string, tn store.Tenant, journal string, round int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(),
		envCrashChild+"=1",
		envCrashDSN+"="+dsn,
		envCrashJournal+"="+journal,
		envCrashService+"="+tn.Service,
		envCrashRound+"="+strconv.Itoa(round),
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the crash child: %v", err)
	}
	exited := make(chan error, 1)
	ready := make(chan struct{})
	var out lockedBuffer
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.Contains(sc.Text(), crashReady) {
				close(ready)
				signalled = true
			}
		}
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("round %d: the crash child exited before it was ready (%v)\nstdout:\n%s\nstderr:\n%s", round, err, out.String(), stderr.String())
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("round %d: the crash child was not ready within a minute\nstdout:\n%s\nstderr:\n%s", round, out.String(), stderr.String())
	}
	select {
	case err := <-exited:
		t.Fatalf("round %d: the crash child exited on its own (%v)\nstdout:\n%s\nstderr:\n%s", round, err, out.String(), stderr.String())
	case <-time.After(500*time.Millisecond + mathrand.N(time.Second)):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("killing the crash child: %v", err)
	}
	<-exited
}

// runPattern returns a -test.run pattern that selects exactly the test
// named name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// crashChild is the child's side of CrashTest: work until killed.
func crashChild(t *testing.T, env CrashEnv) {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "storetest crash child: "+format+"\n", args...)
		os.Exit(3)
	}
	round, err := strconv.Atoi(os.Getenv(envCrashRound))
	if err != nil {
		fail("bad %s: %v", envCrashRound, err)
	}
	ctx := context.Background()
	b := env.Open(t, os.Getenv(envCrashDSN))
	st, err := b.Store(store.Tenant{Service: os.Getenv(envCrashService), Provider: "p"})
	if err != nil {
		fail("Store: %v", err)
	}
	j, err := os.OpenFile(os.Getenv(envCrashJournal), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail("journal: %v", err)
	}
	record := func(lines []string) {
		if len(lines) == 0 {
			return
		}
		if _, err := j.WriteString(strings.Join(lines, "")); err != nil {
			fail("journal: %v", err)
		}
		if err := j.Sync(); err != nil {
			fail("journal: %v", err)
		}
	}
	lease, err := takeCrashLease(ctx, st)
	if err != nil {
		fail("taking the partition's lease: %v", err)
	}
	record([]string{fmt.Sprintf("L %d\n", lease.Epoch)})
	fmt.Println(crashReady)
	// Never outlive a parent that died itself.
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		var lines []string

		n := 1 + i%4
		ms := make([]store.NewMessage, n)
		for k := range ms {
			ms[k] = msg(fmt.Sprintf("r%d-i%d-m%d", round, i, k))
		}
		seqs, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: crashQueue, Messages: ms})
		if err != nil {
			fail("Enqueue: %v", err)
		}
		for k, s := range seqs {
			lines = append(lines, fmt.Sprintf("E %d %s\n", s, ms[k].Payload))
		}
		record(lines)

		if i%2 == 1 {
			ls, err := st.Lease(ctx, &store.LeaseParams{Queue: crashQueue, Max: 3, Visibility: time.Minute})
			if err != nil {
				fail("Lease: %v", err)
			}
			if len(ls) > 0 {
				// Journal the attempt first: a complete that commits
				// just before the kill is never acknowledged, and the
				// parent must know the message may be gone.
				p := store.SettleParams{Queue: crashQueue, Action: store.Complete}
				lines = lines[:0]
				for _, l := range ls {
					p.Receipts = append(p.Receipts, l.Receipt)
					lines = append(lines, fmt.Sprintf("P %d\n", l.Seq))
				}
				record(lines)
				res, err := st.Settle(ctx, &p)
				if err != nil {
					fail("Settle: %v", err)
				}
				lines = lines[:0]
				for k, r := range res {
					if r.Err != nil {
						fail("complete of seq %d: %v", ls[k].Seq, r.Err)
					}
					lines = append(lines, fmt.Sprintf("C %d\n", ls[k].Seq))
				}
				record(lines)
			}
		}

		rs := make([]store.NewRecord, 1+i%3)
		for k := range rs {
			rs[k] = rec(fmt.Sprintf("r%d-i%d-a%d", round, i, k))
		}
		res, err := st.Append(ctx, &store.AppendParams{Partition: crashPartition, Records: rs})
		if err != nil {
			fail("Append: %v", err)
		}
		lines = lines[:0]
		for k, r := range rs {
			lines = append(lines, fmt.Sprintf("A %d %s\n", res.First+int64(k), r.Payload))
		}
		record(lines)

		// Journal the attempt first, as for completes: a save that
		// commits just before the kill is never acknowledged, and the
		// parent must know the progress may be there.
		record([]string{fmt.Sprintf("S %d\n", res.Last)})
		if err := saveCrashProgress(ctx, st, lease.Epoch, res.Last); err != nil {
			fail("SaveProgress through %d under epoch %d: %v", res.Last, lease.Epoch, err)
		}
		record([]string{fmt.Sprintf("K %d\n", res.Last)})
	}
	fail("never killed")
}

// takeCrashLease takes the crash partition's lease from the child of the
// round before, which died holding it, under a new epoch.
func takeCrashLease(ctx context.Context, st store.Store) (store.PartitionLease, error) {
	ls, err := st.Leases(ctx)
	if err != nil {
		return store.PartitionLease{}, err
	}
	for _, l := range ls {
		if l.Partition == crashPartition && l.Held {
			if err := st.ReleasePartitions(ctx, l.Owner, []store.PartitionLease{l}); err != nil {
				return store.PartitionLease{}, err
			}
		}
	}
	ls, err = st.LeasePartitions(ctx, &store.PartitionLeaseParams{Node: crashNode, Acquire: []int32{crashPartition}, Duration: time.Hour})
	if err != nil {
		return store.PartitionLease{}, err
	}
	if len(ls) != 1 {
		return store.PartitionLease{}, fmt.Errorf("acquired %+v, want partition %d", ls, crashPartition)
	}
	return ls[0], nil
}

// saveCrashProgress saves, under epoch, the crash subscription's position
// and the crash partition's checkpoint through position.
func saveCrashProgress(ctx context.Context, st store.Store, epoch, position int64) error {
	res, err := st.SaveProgress(ctx, []store.ProgressParams{{Partition: crashPartition, Epoch: epoch,
		Checkpoint: position, Positions: map[string]int64{crashSub: position}}})
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	if res[0].Checkpoint != position {
		return fmt.Errorf("checkpoint stored at %d", res[0].Checkpoint)
	}
	return nil
}

// crashJournal is what the children acknowledged.
type crashJournal struct {
	enqueued   map[int64]string // seq → payload
	completed  map[int64]bool
	completing map[int64]bool   // completes attempted, perhaps not acknowledged
	appended   map[int64]string // position → payload
	epoch      int64            // the last lease epoch acquired
	saved      int64            // the last progress saved
	saving     int64            // the last progress save attempted, perhaps not acknowledged
}

// readJournal parses the journal, ignoring a last line cut short by the
// kill.
func readJournal(t *testing.T, path string) crashJournal {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the journal: %v", err)
	}
	j := crashJournal{enqueued: map[int64]string{}, completed: map[int64]bool{}, completing: map[int64]bool{}, appended: map[int64]string{}}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		bad := func() { t.Fatalf("bad journal line %q", line) }
		if len(f) < 2 {
			bad()
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			bad()
		}
		switch {
		case f[0] == "E" && len(f) == 3:
			if old, dup := j.enqueued[n]; dup {
				t.Fatalf("journal: seq %d acknowledged for %q and %q", n, old, f[2])
			}
			j.enqueued[n] = f[2]
		case f[0] == "C" && len(f) == 2:
			if j.completed[n] {
				t.Fatalf("journal: seq %d completed twice", n)
			}
			j.completed[n] = true
		case f[0] == "P" && len(f) == 2:
			j.completing[n] = true
		case f[0] == "A" && len(f) == 3:
			if old, dup := j.appended[n]; dup {
				t.Fatalf("journal: position %d acknowledged for %q and %q", n, old, f[2])
			}
			j.appended[n] = f[2]
		case f[0] == "L" && len(f) == 2:
			j.epoch = n
		case f[0] == "S" && len(f) == 2:
			j.saving = n
		case f[0] == "K" && len(f) == 2:
			if n != j.saving {
				t.Fatalf("journal: progress through %d acknowledged, but the save attempted was through %d", n, j.saving)
			}
			j.saved = n
		default:
			bad()
		}
	}
	return j
}

// checkCrash opens the database afresh and checks it against the journal.
func checkCrash(t *testing.T, env CrashEnv, tn store.Tenant, journal string, round int) crashJournal {
	t.Helper()
	ctx := t.Context()
	j := readJournal(t, journal)
	st, err := env.Open(t, env.DSN).Store(tn)
	if err != nil {
		t.Fatalf("Store after the crash: %v", err)
	}

	inQueue := map[int64]string{}
	payloads := map[string]int64{}
	var maxSeq int64
	for _, m := range peekAll(t, ctx, st, crashQueue) {
		p := string(m.Payload)
		if other, dup := payloads[p]; dup {
			t.Fatalf("round %d: payload %q stored twice, at seqs %d and %d", round, p, other, m.Seq)
		}
		payloads[p] = m.Seq
		inQueue[m.Seq] = p
		maxSeq = max(maxSeq, m.Seq)
	}
	for seq, p := range j.enqueued {
		maxSeq = max(maxSeq, seq)
		got, there := inQueue[seq]
		switch {
		case j.completed[seq] && there:
			t.Fatalf("round %d: seq %d (%q) was completed, as the journal records, but is still in the queue", round, seq, p)
		case !j.completed[seq] && !j.completing[seq] && !there:
			t.Fatalf("round %d: seq %d (%q) was enqueued, as the journal records, and never completed, but is gone", round, seq, p)
		case there && got != p:
			t.Fatalf("round %d: seq %d holds %q, but its enqueue of %q was acknowledged", round, seq, got, p)
		}
	}

	// The partition log: gap-free from 1, every acknowledged record at its
	// position.
	var log []string
	for {
		rs := read(t, st, crashPartition, int64(len(log)), store.DefaultMaxBatch)
		for k, r := range rs {
			if r.Position != int64(len(log)+1) {
				t.Fatalf("round %d: log position %d follows %d (index %d)", round, r.Position, len(log), k)
			}
			log = append(log, string(r.Payload))
		}
		if len(rs) == 0 {
			break
		}
	}
	for pos, p := range j.appended {
		if pos > int64(len(log)) || log[pos-1] != p {
			t.Fatalf("round %d: record %q was appended at position %d, as the journal records, but the log (head %d) does not hold it there", round, p, pos, len(log))
		}
	}
	if head := info(t, st, crashPartition).Head; head != int64(len(log)) {
		t.Fatalf("round %d: PartitionInfo head %d, but the log reads %d records", round, head, len(log))
	}
	checkCrashProgress(t, st, j, round)

	// The reopened database takes writes where the dead process left off.
	seqs := enqueue(t, ctx, st, crashQueue, msg(fmt.Sprintf("parent-%d", round)))
	if seqs[0] <= maxSeq {
		t.Fatalf("round %d: enqueue after the crash got seq %d, already used (up to %d)", round, seqs[0], maxSeq)
	}
	if res := appendRecs(t, st, crashPartition, rec(fmt.Sprintf("parent-%d", round))); res.First != int64(len(log))+1 {
		t.Fatalf("round %d: append after the crash at position %d, want %d", round, res.First, len(log)+1)
	}
	return j
}

// checkCrashProgress checks that the crash partition's lease is under the
// epoch last acquired, or a later one, and that its progress is the
// last save acknowledged, or the one attempted after it: checkpoint and
// position of one save, never older than the acknowledged one, never
// newer than the last attempted.
func checkCrashProgress(t *testing.T, st store.Store, j crashJournal, round int) {
	t.Helper()
	ls, err := st.Leases(t.Context())
	if err != nil {
		t.Fatalf("Leases after the crash: %v", err)
	}
	var epoch int64
	for _, l := range ls {
		if l.Partition == crashPartition && l.Group == "" {
			epoch = l.Epoch
		}
	}
	if epoch < j.epoch {
		t.Fatalf("round %d: partition %d leased under epoch %d, older than the acquired %d", round, crashPartition, epoch, j.epoch)
	}
	pp, err := st.Progress(t.Context(), crashPartition)
	if err != nil {
		t.Fatalf("Progress after the crash: %v", err)
	}
	pos := pp.Positions[crashSub]
	switch {
	case pp.Checkpoint != pos:
		t.Fatalf("round %d: checkpoint %d and position %d, but each save stored both at once", round, pp.Checkpoint, pos)
	case pos < j.saved:
		t.Fatalf("round %d: progress through %d, older than the acknowledged %d", round, pos, j.saved)
	case pos > j.saving:
		t.Fatalf("round %d: progress through %d, newer than the last save attempted (%d)", round, pos, j.saving)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
