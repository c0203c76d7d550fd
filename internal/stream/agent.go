package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/backoff"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// agent pulls one partition: it reads the log into its cache, walks one
// cursor per subscription over it, hands each subscription's events to
// its consumer in order per stream, and stores progress. One goroutine
// owns all of its state; deliveries run in goroutines of their own and
// report back on results.
type agent struct {
	n         *Node
	partition int32
	lease     store.PartitionLease // as the balancer gave it
	epoch     int64
	// until is when the lease may have ended (ns on the node's clock,
	// since it started): no delivery starts after it.
	until atomic.Int64
	cache Cache
	log   *slog.Logger

	subs map[string]*subState
	// proposed is the checkpoint the agent last proposed, and stored
	// what the save stored: the proposal capped by every stored position
	// of the partition's subscriptions, those of other groups included.
	proposed, stored int64
	// watermark is the partition's retention watermark after the last
	// trim, at trimmedTime (-1: not trimmed yet). While it is below the
	// stored checkpoint, records retention kept may age out: a trim is
	// due every TrimInterval, new records or not. timed is set when the
	// last trim found retention that trims with time alone (an expiry or
	// a parked retention): then too.
	watermark   int64
	trimmedTime time.Time
	timed       bool
	// gaps counts the retention gaps subscriptions met here.
	gaps      int64
	submitted time.Time // last progress handed to the saver
	savedCh   chan saved
	readWait  time.Duration
	nextRead  time.Time
	busy      bool // the last step left records to read
	refreshed time.Time

	results chan result
	// lagged brings a lagging window's read, done in a goroutine of its
	// own (one at a time: lagReading), to the agent's goroutine.
	lagged     chan lagResult
	lagReading bool
	// held is set when a lagging window had an event to deliver that the
	// node's lagging rate held back: the agent looks again soon. heldTotal
	// counts those times.
	held      bool
	heldTotal int64
	// inflow measures the head window's intake for the lagging
	// subscriptions' allowance (see lagInflowShare).
	inflow inflow
	// replays brings replays of parked events to the agent's goroutine.
	replays chan *replayReq
	// wg counts the goroutines of lagging reads, and inDelivery those of
	// deliveries.
	wg         sync.WaitGroup
	inDelivery *inDelivery
	// deliveries carries the context of deliveries: cancelled when a
	// stop's deadline passes.
	deliveries context.Context
	cancel     context.CancelFunc
	// leaseCtx ends, with errLeaseLapsed, once the lease may have ended
	// by this node's clock: deliveries in progress are cancelled then
	// (a renewal after that starts a new one). Owned by run's goroutine.
	leaseCtx    context.Context
	leaseCancel context.CancelCauseFunc

	stop chan context.Context
	done chan struct{}
	err  error
	// fenced is set once another node owns the partition: deliveries
	// then write nothing more.
	fenced atomic.Bool

	// statsAt is when a step last published stats; statsDue is set when
	// one skipped publishing them (see statsEvery). Owned by run's
	// goroutine, unlike stats, which statsMu guards.
	statsAt  time.Time
	statsDue bool
	statsMu  sync.Mutex
	stats    PartitionStats
}

// result is a finished delivery.
type result struct {
	s        *subState
	gen      int
	key      string
	pos      int64
	err      error
	attempts int
	// stopped: the delivery neither succeeded nor gave up (shutdown, or
	// parking failed); the event stays unresolved.
	stopped bool
	// fault: the consumer's policy faults the subscription.
	fault bool
	// replay is the replay this delivery was (nil: a live event).
	replay *replayReq
}

// errLeaseLapsed cancels the deliveries of an agent whose lease may have
// ended: another node may deliver the partition by now.
var errLeaseLapsed = errors.New("the partition's lease may have ended")

func newAgent(n *Node, lease store.PartitionLease) *agent {
	dctx, cancel := context.WithCancel(context.Background())
	lctx, lcancel := context.WithCancelCause(context.Background())
	partition := lease.Partition
	return &agent{
		leaseCtx: lctx, leaseCancel: lcancel,
		n: n, partition: partition, lease: lease, epoch: lease.Epoch, proposed: lease.Checkpoint, stored: lease.Checkpoint, watermark: -1,
		cache: newCache(n.cacheConfig(), lease.Checkpoint),
		log:   n.cfg.Logger.With("partition", partition),
		subs:  make(map[string]*subState), readWait: n.cfg.PollInterval,
		results:    make(chan result, 64),
		lagged:     make(chan lagResult, 1),
		replays:    make(chan *replayReq),
		savedCh:    make(chan saved, 1),
		deliveries: dctx, cancel: cancel, inDelivery: newInDelivery(),
		stop: make(chan context.Context, 1), done: make(chan struct{}),
		// Stats name the partition and its epoch from the start, before
		// the first step publishes the rest.
		stats: PartitionStats{Partition: partition, Epoch: lease.Epoch, ProposedCheckpoint: lease.Checkpoint, StoredCheckpoint: lease.Checkpoint},
	}
}

// watchLease cancels the deliveries in progress once the lease may have
// ended, and starts a new lease context once a renewal came after that.
// It runs on every step, so within a poll interval of the lease's end;
// deliveries also check the lease just before each attempt.
func (a *agent) watchLease() {
	switch owns, ended := a.owns(), a.leaseCtx.Err() != nil; {
	case !owns && !ended:
		a.leaseCancel(errLeaseLapsed)
	case owns && ended:
		a.leaseCtx, a.leaseCancel = context.WithCancelCause(context.Background())
	}
}

// extend lets deliveries start until the given time.
func (a *agent) extend(until time.Time) {
	a.until.Store(int64(until.Sub(a.n.born)))
}

// leased reports whether the partition's lease may still be held, by
// this node's clock: deliveries start only then.
func (a *agent) leased() bool {
	return int64(time.Since(a.n.born)) < a.until.Load()
}

// owns reports whether the agent still owns its partition: its lease
// may still be held, and no write was fenced. Deliveries start, and
// faults and parked events are written, only then; those writes also
// carry the lease's epoch (fence), so that one that reaches the database
// after another node acquired the partition changes nothing.
func (a *agent) owns() bool {
	return a.leased() && !a.fenced.Load()
}

// fence is the agent's lease, as the fence of the writes it makes.
func (a *agent) fence() *store.Fence {
	return &store.Fence{Group: a.n.cfg.Group, Partition: a.partition, Epoch: a.epoch}
}

// recordFault stores a subscription's fault under the agent's lease.
func (a *agent) recordFault(ctx context.Context, id, reason string) error {
	err := a.n.st.FaultSubscription(ctx, &store.FaultParams{ID: id, Reason: reason, Fence: a.fence()})
	if errors.Is(err, sluicetype.ErrFenced) {
		a.stopFenced(err)
	}
	return err
}

// stopFenced stops the agent once a write of its was fenced: another
// node owns the partition.
func (a *agent) stopFenced(err error) {
	a.err = err
	a.fenced.Store(true)
	a.log.Error("sluice: stream partition owned by another node now; this agent stops", "err", err)
	a.statsMu.Lock()
	a.stats.Stopped = err.Error()
	a.statsMu.Unlock()
}

// start loads the partition's subscriptions and progress, trying again
// with backoff while the database fails, until it succeeds or the agent
// is stopped.
func (a *agent) start() bool {
	for failures := 1; ; failures++ {
		err := a.load()
		if err == nil {
			return true
		}
		wait := startBackoff.Delay(failures)
		a.log.Warn("sluice: stream agent cannot start; trying again", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-a.stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// startBackoff spaces an agent's attempts to load its partition, and
// parkBackoff its attempts to park an event, while the database fails.
var (
	startBackoff = backoff.Policy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}
	parkBackoff  = backoff.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: true}
)

// run is the agent's loop; it returns when stopped (after finishing or
// abandoning its deliveries and storing final progress), or fenced.
func (a *agent) run() {
	defer close(a.done)
	defer a.cancel()
	defer func() { a.leaseCancel(nil) }()
	tail := a.n.st.TailPartition(a.partition)
	defer tail.Stop()
	refresh, unrefresh := a.n.watchSubscriptions()
	defer unrefresh()
	if !a.start() {
		return
	}
	tick := time.NewTicker(a.n.cfg.PollInterval)
	defer tick.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	for {
		a.step()
		if a.err != nil {
			stopped, cancel := context.WithCancel(context.Background())
			cancel()
			a.shutdown(stopped)
			return
		}
		var idle <-chan time.Time
		switch {
		case a.busy:
			idle = closedTime // more to read: only look at what is waiting
		case a.held:
			wake.Reset(a.n.lag.retry())
			idle = wake.C
		case a.statsDue:
			wake.Reset(statsEvery)
			idle = wake.C
		}
		select {
		case r := <-a.results:
			a.resolve(r)
			a.drainResults()
		case <-tail.Ready():
			if recs, read := tail.Take(); !a.follow(recs) || read {
				a.nextRead = time.Time{}
			}
		case <-refresh:
			a.refreshed = time.Time{}
		case r := <-a.lagged:
			a.admitLagged(r)
		case r := <-a.replays:
			a.queueReplay(r)
		case o := <-a.savedCh:
			a.applySaved(o)
		case <-tick.C:
		case <-idle:
		case ctx := <-a.stop:
			a.shutdown(ctx)
			return
		}
	}
}

// closedTime is a channel that is always ready.
var closedTime = func() <-chan time.Time {
	ch := make(chan time.Time)
	close(ch)
	return ch
}()

func (a *agent) drainResults() {
	for {
		select {
		case r := <-a.results:
			a.resolve(r)
		default:
			return
		}
	}
}

// maxReadsPerStep bounds the head window's reads of one step.
const maxReadsPerStep = 8

// step does whatever is due: refresh subscriptions, read, dispatch,
// purge, store progress. It sets busy when it stopped reading with more
// to read.
func (a *agent) step() {
	now := time.Now()
	a.busy = false
	if now.Sub(a.refreshed) >= a.n.cfg.RefreshInterval {
		if err := a.refreshSubs(); err != nil {
			a.log.Warn("sluice: stream agent cannot list subscriptions", "err", err)
		}
		a.refreshed = now
	}
	a.place()
	// A bounded number of head reads a step, so that stops, results and
	// progress are not held up by a long backlog nobody here waits for.
	// A lagging window's read goes to a goroutine of its own (one at a
	// time), so that history read again never holds up the head.
	for reads := 0; ; reads++ {
		p, ok := a.cache.Plan(now, !now.Before(a.nextRead), !a.lagReading)
		if !ok {
			break
		}
		if !p.Head {
			a.readLagging(p)
			continue
		}
		if reads == maxReadsPerStep {
			a.busy = true
			break
		}
		got, err := a.read(p)
		if err != nil {
			a.log.Warn("sluice: stream agent cannot read", "err", err)
		}
		if got > 0 {
			a.dispatch()
			a.purge()
		}
		switch {
		case err != nil:
			a.readWait = a.n.cfg.IdlePollInterval
		case got == p.Max && got > 0:
			a.readWait = a.n.cfg.PollInterval
			continue // read on while there is room and data
		case got > 0:
			// Fewer than asked for: the read reached the head. The next
			// append wakes the agent; until then, read again a poll
			// interval from now rather than at once, which would find
			// nothing.
			a.readWait = a.n.cfg.PollInterval
		case p.Max == 0:
			a.readWait = a.n.cfg.PollInterval // full: look again soon
		default:
			a.readWait = min(2*a.readWait, a.n.cfg.IdlePollInterval)
		}
		a.nextRead = now.Add(a.readWait)
	}
	if _, more := a.cache.Plan(now, false, true); more && !a.lagReading {
		a.busy = true // lagging windows have more to read
	}
	a.watchLease()
	a.dispatch()
	a.purge()
	a.save()
	if now.Sub(a.statsAt) >= statsEvery {
		a.publishStats()
		a.statsAt, a.statsDue = now, false
	} else {
		a.statsDue = true // published within statsEvery, by a step then
	}
}

// statsEvery bounds how often a step publishes the agent's stats: steps
// follow deliveries, thousands a second in a replay, and the stats are
// built new each time. Within statsEvery of a skipped publication the
// agent steps again (run), so stats lag by at most about that much.
const statsEvery = 10 * time.Millisecond

// load reads the partition's stored progress and subscriptions, and
// starts the cache at the lowest position a subscription here needs.
func (a *agent) load() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.n.cfg.RefreshInterval+10*time.Second)
	defer cancel()
	if err := a.refreshSubsCtx(ctx); err != nil {
		return err
	}
	a.refreshed = time.Now()
	from := a.stored
	first := true
	for _, s := range a.subs {
		if s.active() && (first || s.cursor < from) {
			from, first = s.cursor, false
		}
	}
	a.cache = newCache(a.n.cacheConfig(), from)
	a.place()
	return nil
}

// place makes every active subscription a member of the cache, lowest
// cursor first, and takes the others out.
func (a *agent) place() {
	var join []*subState
	for _, s := range a.subs {
		switch joined := a.cache.Window(s) != nil; {
		case s.active() && !joined:
			join = append(join, s)
		case !s.active() && joined:
			a.cache.Leave(s)
		}
	}
	if len(join) == 0 {
		return
	}
	slices.SortFunc(join, func(x, y *subState) int {
		return cmp.Or(cmp.Compare(x.cursor, y.cursor), cmp.Compare(x.sub.ID, y.sub.ID))
	})
	a.nextRead = time.Time{} // a window may start anew: read at once
	for _, s := range join {
		if err := a.cache.Join(s); err != nil {
			a.fault(s, fmt.Sprintf("partition %d: no cache window for the subscription at position %d: %v", a.partition, s.cursor, err))
		}
	}
}

// halt stops a subscription (see subState.halt) and takes it out of the
// cache.
func (a *agent) halt(s *subState) {
	s.halt(a.deliveries)
	a.cache.Leave(s)
}

// fault halts a subscription for a reason, stored under the agent's
// lease; until it is stored (the lease may have lapsed, or the database
// failed), the subscription stays halted and the agent tries again.
func (a *agent) fault(s *subState, reason string) {
	a.halt(s)
	s.sub.Fault = reason
	if a.err != nil {
		return // fenced: the new owner decides
	}
	if !a.owns() {
		s.faultPending = reason // recorded if the lease is renewed
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := a.recordFault(ctx, s.sub.ID, reason)
	cancel()
	if errors.Is(err, sluicetype.ErrFenced) {
		return // the new owner decides
	}
	if err != nil {
		a.log.Error("sluice: cannot record a stream subscription's fault; it stays halted", "subscription", s.sub.ID, "err", err)
		s.faultPending = reason
	}
}

func (a *agent) refreshSubs() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.refreshSubsCtx(ctx)
}

// refreshSubsCtx brings the subscriptions up to date with the database:
// new ones start at their stored position, deleted ones stop, faults set
// or cleared elsewhere apply, and so do repositions, each once.
//
// A subscription's position and its count of repositions come from one
// read (Progress), not from the listing before it: a reposition that
// commits between the two shows in the position only, and taken with the
// listing's older count, it would be applied again at the next refresh
// (redelivering what followed it), and saves under that count refused
// meanwhile. The listing's count only says that there is one to look for.
func (a *agent) refreshSubsCtx(ctx context.Context) error {
	part := a.partition
	subs, err := a.n.st.Subscriptions(ctx, &store.SubscriptionFilter{Partition: &part})
	if err != nil {
		return err
	}
	var progress *store.PartitionProgress
	load := func() (*store.PartitionProgress, error) {
		if progress == nil {
			pp, err := a.n.st.Progress(ctx, a.partition)
			if err != nil {
				return nil, err
			}
			progress = &pp
		}
		return progress, nil
	}
	seen := make(map[string]bool, len(subs))
	for _, sub := range subs {
		seen[sub.ID] = true
		s, ok := a.subs[sub.ID]
		if ok && !s.sub.CreatedAt.Equal(sub.CreatedAt) {
			// Deleted and created again with the same id (a namespace
			// subscription): a new subscription, with its own start.
			s.end()
			s.dropReplays(errSubscriptionGone)
			a.cache.Leave(s)
			delete(a.subs, sub.ID)
			ok = false
		}
		var repositions int64 // the count of those applied
		if ok {
			repositions = s.sub.Repositions
		}
		if ok && repositions != sub.Repositions {
			// Repositioned: from the stored position on, and nothing
			// more from the old one, if the position read counts a
			// reposition the agent has not applied.
			pp, err := load()
			if err != nil {
				return err
			}
			if pos, found := pp.Positions[sub.ID]; found && pp.Repositions[sub.ID] != repositions {
				a.repositioned(s, pos)
				repositions = pp.Repositions[sub.ID]
			}
		}
		if !ok {
			pp, err := load()
			if err != nil {
				return err
			}
			pos, ok := pp.Positions[sub.ID]
			if ok {
				repositions = pp.Repositions[sub.ID]
			} else {
				// A subscription's position is its resume hint, stored
				// with it; without one here (a namespace subscription
				// created without this partition, a row lost), it
				// resumes from the partition's checkpoint, which no
				// subscription's position is below: at worst it gets
				// events again, never fewer. Its first save stores one.
				pos = pp.Checkpoint
				a.log.Warn("sluice: stream subscription has no stored position on the partition; it resumes from the checkpoint",
					"subscription", sub.ID, "checkpoint", pos)
			}
			saved := pos
			if !ok {
				saved = -1 // none stored: the first save writes it
			}
			s = &subState{sub: sub, cursor: pos, saved: saved, resolved: make(map[int64]bool),
				streams: make(map[string]*streamQueue)}
			s.ctx, s.cancel = context.WithCancel(a.deliveries)
			if c, ok := a.n.consumers[sub.Consumer]; ok {
				s.c = c
			}
			a.subs[sub.ID] = s
			a.log.Debug("sluice: stream subscription joins", "subscription", sub.ID, "position", pos, "handled", s.c != nil)
		}
		s.sub = sub
		// Saves go under the count the position came with, which may be
		// past the listing's.
		s.sub.Repositions = repositions
		switch {
		case s.faultPending != "" && sub.Fault == "":
			// The fault this agent found is not recorded yet: record it,
			// and stay halted meanwhile (only while it owns the
			// partition: the owner decides).
			if !a.owns() {
				break
			}
			if err := a.recordFault(ctx, sub.ID, s.faultPending); err != nil {
				a.log.Warn("sluice: cannot record a stream subscription's fault", "subscription", sub.ID, "err", err)
			} else {
				s.sub.Fault, s.faultPending = s.faultPending, ""
			}
		case s.faulted && sub.Fault == "":
			s.faulted = false
		case !s.faulted && sub.Fault != "":
			a.halt(s) // faulted on another partition
		}
	}
	for id, s := range a.subs {
		if !seen[id] {
			s.end() // unsubscribed: its deliveries stop at once
			s.dropReplays(errSubscriptionGone)
			a.cache.Leave(s)
			delete(a.subs, id)
		}
	}
	return nil
}

// repositioned moves a subscription to the position a reposition stored:
// what it queued is dropped and what it has in delivery cancelled (as a
// halt does; nothing starts before those deliveries ended), and it reads
// on from pos. Its fault, which the reposition cleared, goes with it.
func (a *agent) repositioned(s *subState, pos int64) {
	a.log.Info("sluice: stream subscription repositioned", "subscription", s.sub.ID, "from", s.safe(), "to", pos)
	a.halt(s)
	s.cursor, s.saved = pos, pos
	s.faulted, s.faultPending = false, ""
}

// follow adds records this process appended to the partition, as its
// tail handed them over, to the cache's head window: those it has not
// read yet, if they follow the last one it has and it has room for all
// of them. It reports whether it has everything up to the last of them.
func (a *agent) follow(recs []sluicetype.Record) bool {
	return a.cache.Follow(recs)
}

// lagResult is a lagging window's read.
type lagResult struct {
	p    ReadPlan
	recs []sluicetype.Record
	err  error
}

// readLagging reads what a lagging window's plan asks for in a goroutine
// of its own, whose result admitLagged takes. The goroutine touches
// nothing of the agent's but the store; it ends with the deliveries'
// context, which a stop cancels, and the stop waits for it.
func (a *agent) readLagging(p ReadPlan) {
	a.lagReading = true
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ctx, cancel := context.WithTimeout(a.deliveries, 30*time.Second)
		defer cancel()
		recs, err := a.n.st.Read(ctx, &store.ReadParams{Partition: a.partition, After: p.After, Max: p.Max,
			Namespace: p.Namespace, Key: p.Key, Through: p.Through})
		a.lagged <- lagResult{p, recs, err}
	}()
}

// admitLagged takes a lagging window's read: its records go into the
// window if it still matches the plan (the window may have merged or
// moved meanwhile: then nothing changes, and it is planned again), a gap
// goes to skipTrimmed, and a failure or a read that found nothing waits
// before the window reads again.
func (a *agent) admitLagged(r lagResult) {
	a.lagReading = false
	p, err, got := r.p, r.err, 0
	switch {
	case errors.Is(err, sluicetype.ErrTrimmed):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = a.skipTrimmed(ctx, p)
		cancel()
	case err == nil:
		if err = a.cache.Admit(p, r.recs); err == nil {
			got = len(r.recs)
		}
	}
	now := time.Now()
	switch {
	case errors.Is(err, errStalePlan):
	case err != nil:
		a.log.Warn("sluice: stream agent cannot read", "err", err)
		a.cache.Backoff(p, now.Add(a.n.cfg.IdlePollInterval))
	case got == 0 && p.Namespace == "":
		// Nothing where the next window said there was: look again
		// later rather than at once. (A read of one stream that found
		// nothing reached the next window.)
		a.cache.Backoff(p, now.Add(a.n.cfg.PollInterval))
	}
	if got > 0 {
		a.dispatch()
		a.purge()
	}
}

// read reads what a plan asks for into the cache, and returns how many
// records it added.
func (a *agent) read(p ReadPlan) (int, error) {
	if p.Max == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := a.n.st.Read(ctx, &store.ReadParams{Partition: a.partition, After: p.After, Max: p.Max,
		Namespace: p.Namespace, Key: p.Key, Through: p.Through})
	if errors.Is(err, sluicetype.ErrTrimmed) {
		return 0, a.skipTrimmed(ctx, p)
	}
	if err != nil {
		return 0, err
	}
	if err := a.cache.Admit(p, recs); err != nil {
		return 0, err
	}
	return len(recs), nil
}

// skipTrimmed handles records retention deleted before every
// subscription of a window had read them: a namespace's expiry passed
// (its subscriptions hold nothing older), or, which the holds should
// prevent, a trim went too far. Each subscription of the window that had
// not read them meets the gap (see retentionGap), and the window moves
// past it.
func (a *agent) skipTrimmed(ctx context.Context, p ReadPlan) error {
	if !a.owns() {
		// Another node may own the partition, and have trimmed what it
		// delivered: the owner decides, not this agent.
		return nil
	}
	info, err := a.n.st.PartitionInfo(ctx, a.partition)
	if err != nil {
		return err
	}
	for _, m := range a.cache.Gap(p, info.Trimmed) {
		a.retentionGap(m.(*subState), info.Trimmed)
	}
	return nil
}

// RetentionGapProperty is the property of a parked marker of a retention
// gap: the positions retention deleted before the subscription read them,
// as "first-last". A marker has no payload; Replay leaves it parked (a
// parked retention removes it).
const RetentionGapProperty = "sluice-retention-gap"

// retentionGap applies a subscription's failure policy to the records of
// its partition retention deleted before it read them, after its cursor
// through trimmed: under Fault it is faulted with a reason that names
// ErrRetentionGap; under Park a marker of the gap is parked (with that
// reason) and the subscription reads on after the gap, or is faulted if
// the marker cannot be stored. Nothing is skipped silently.
func (a *agent) retentionGap(s *subState, trimmed int64) {
	reason := fmt.Sprintf("partition %d: retention deleted positions %d through %d before the subscription read them: %v",
		a.partition, s.cursor+1, trimmed, sluicetype.ErrRetentionGap)
	a.log.Error("sluice: stream subscription lost records to retention", "subscription", s.sub.ID, "reason", reason)
	a.gaps++
	if s.c.OnFailure == Fault {
		a.fault(s, reason)
		return
	}
	if err := a.parkGap(s, trimmed, reason); err != nil {
		a.fault(s, fmt.Sprintf("%s (its marker could not be parked: %v)", reason, err))
		return
	}
	s.cursor = trimmed // it joins a window again after the gap
}

// parkGap parks the marker of a subscription's retention gap through
// trimmed, under the agent's lease.
func (a *agent) parkGap(s *subState, trimmed int64, reason string) error {
	rec := sluicetype.Record{Position: trimmed, Namespace: s.sub.Namespace, Key: s.sub.Key, AppendedAt: time.Now(),
		Properties: map[string]string{RetentionGapProperty: fmt.Sprintf("%d-%d", s.cursor+1, trimmed)}}
	ev := store.ParkedEvent{Partition: a.partition, Record: rec, Error: store.Truncate(reason, store.MaxReasonLen)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.n.st.Park(ctx, &store.ParkParams{Subscription: s.sub.ID, Events: []store.ParkedEvent{ev}, Fence: a.fence()})
	if errors.Is(err, sluicetype.ErrFenced) {
		a.stopFenced(err)
	}
	return err
}

// dispatch walks each active subscription's cursor over the cache,
// queueing the events that concern it, and starts deliveries up to the
// consumer's concurrency, one per stream at a time; those of a lagging
// window within the node's lagging rate.
func (a *agent) dispatch() {
	a.place()
	owns := a.owns()
	now, head := time.Now(), false
	a.held = false
	if a.inflow.roll(now, a.cache.ReadThrough()) {
		for _, s := range a.subs {
			s.lagStarted = 0
		}
	}
	for _, s := range a.subs {
		if s.c != nil && s.faulted && !s.draining() && owns {
			a.startReplays(s) // parked events go again, faulted or not
		}
		if !s.active() {
			continue
		}
		if w := a.cache.Window(s); w != nil && !s.walk(w, a.cache.Lookahead()) {
			// Its window moved on past it (which joining should prevent):
			// it joins again rather than skip what it has not read.
			a.cache.Leave(s)
			a.place()
		}
		if s.draining() {
			continue // deliveries of a halted generation are still ending
		}
		if !owns {
			continue // the lease may have moved on: deliver nothing until renewed
		}
		a.startReplays(s)
		lagging := a.cache.Lagging(s)
		for s.inflight < s.c.MaxConcurrency {
			// A token first, if there is one, so that what the allowance
			// starts counts against the bound too.
			if lagging && s.hasNext() && !a.n.lag.allow(now) && !a.inflow.allows(s.lagStarted) {
				a.held = true
				a.heldTotal++
				break
			}
			rec, ok := s.next()
			if !ok {
				break
			}
			head = head || !lagging
			if lagging {
				s.lagStarted++
			}
			a.inDelivery.start()
			go a.deliver(s, s.deliveryCtx(a.leaseCtx), s.c, s.sub.ID, s.gen, rec)
		}
	}
	if head {
		a.n.lag.head(now)
	}
}

// deliver runs in its own goroutine: it delivers one event, applies the
// failure policy if every attempt failed, and reports. The delivery ends
// with ctx (see subState.deliveryCtx), and each attempt starts only while
// the agent owns the partition. It reads nothing of s, which the agent's
// goroutine owns, nor changes r, the cache's.
func (a *agent) deliver(s *subState, ctx context.Context, c *Consumer, id string, gen int, r *sluicetype.Record) {
	defer a.inDelivery.end()
	attempts, stopped, err := c.deliver(ctx, EventOf(r, a.partition, id), a.owns, a.inDelivery)
	res := result{s: s, gen: gen, key: r.Key, pos: r.Position, err: err, attempts: attempts, stopped: stopped}
	if err != nil && !stopped {
		a.log.Warn("sluice: stream delivery failed", "subscription", id, "stream", r.Namespace+"/"+r.Key,
			"position", r.Position, "attempts", attempts, "policy", c.OnFailure, "err", err)
		if c.OnFailure == Fault {
			res.fault = true
		} else {
			res.stopped = !a.park(ctx, id, r, err, attempts)
		}
	}
	a.report(res)
}

// report hands a finished delivery to the agent's goroutine, or drops
// it once the agent has stopped: a handler its stop walked away from
// returned (the event stays unresolved, and goes again).
func (a *agent) report(r result) {
	select {
	case a.results <- r:
	case <-a.done:
	}
}

// park stores a given-up event among its subscription's parked events,
// retrying until it is stored or the agent's deliveries are cancelled.
func (a *agent) park(ctx context.Context, sub string, r *sluicetype.Record, cause error, attempts int) bool {
	ev := store.ParkedEvent{Partition: a.partition, Record: *r, Error: store.Truncate(cause.Error(), store.MaxReasonLen), Attempts: attempts}
	parked := false
	_ = backoff.Retry(ctx, parkBackoff, func(int) bool {
		if !a.owns() || ctx.Err() != nil {
			return true // another node may own the partition, or the subscription stopped
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := a.n.st.Park(tctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev}, Fence: a.fence()})
		cancel()
		switch {
		case err == nil:
			parked = true
			return true
		case errors.Is(err, sluicetype.ErrFenced):
			// Another node owns the partition: it delivers the event
			// again. The agent stops at its next fenced save.
			a.fenced.Store(true)
			return true
		case errors.Is(err, sluicetype.ErrSubscriptionNotFound):
			return true // unsubscribed meanwhile
		}
		a.log.Warn("sluice: cannot park a stream event", "subscription", sub, "position", r.Position, "err", err)
		return false
	})
	return parked
}

// resolve applies a finished delivery.
func (a *agent) resolve(r result) {
	s := r.s
	s.inflight--
	if r.replay != nil {
		a.resolveReplay(r)
		return
	}
	q := s.streams[r.key]
	if cur, ok := a.subs[s.sub.ID]; !ok || cur != s || r.gen != s.gen || q == nil {
		return // unsubscribed or halted meanwhile
	}
	q.busy = false
	switch {
	case r.stopped:
		// It stays unresolved, and goes again once the partition is
		// owned (after a lapse of its lease), or after a restart.
		s.ready = append(s.ready, r.key)
		return
	case r.fault:
		a.fault(s, fmt.Sprintf("event at position %d of partition %d (stream %s) failed %d times: %v",
			r.pos, a.partition, r.key, r.attempts, r.err))
		return
	}
	s.delivered(r.key, r.pos)
}

// purge drops the cached records every subscription of their window is
// done with, and reshapes the windows.
func (a *agent) purge() {
	a.cache.Purge()
	changed, refused := a.cache.Rebalance()
	for _, m := range refused {
		s := m.(*subState)
		a.fault(s, fmt.Sprintf("partition %d: the cache has no window left for the subscription, which lags at position %d: %v",
			a.partition, s.safe(), sluicetype.ErrWindowLimit))
	}
	if changed {
		a.nextRead = time.Time{} // the head window may have room now
	}
}

// trimBatch bounds the records one save trims; a partition with nothing
// to trim is trimmed every idleTrims TrimIntervals, to find retention set
// since.
const (
	trimBatch = 1000
	idleTrims = 30
)

// progress is what the agent would store now: changed positions, the
// checkpoint (the lowest position of the subscriptions handled here, and
// never past what the agent read), and a trim every TrimInterval while
// the stored checkpoint is above the retention watermark or retention
// trims with time alone: retention acts on time, so records it kept for
// their age go once they are old enough, whether or not new records came,
// and a namespace's expiry removes records whether or not the checkpoint
// moved. ok is false when there is nothing to store. The store keeps the checkpoint at or below every subscription's
// stored position, so those handled elsewhere (by another group, whose
// progress this agent does not follow) or nowhere hold it back there.
func (a *agent) progress() (p store.ProgressParams, ok bool) {
	checkpoint := a.cache.ReadThrough()
	changed := make(map[string]int64)
	var repositions map[string]int64
	for id, s := range a.subs {
		if s.c == nil {
			continue
		}
		pos := s.safe()
		checkpoint = min(checkpoint, pos)
		if pos != s.saved {
			changed[id] = pos
			if s.sub.Repositions > 0 {
				if repositions == nil {
					repositions = make(map[string]int64)
				}
				repositions[id] = s.sub.Repositions
			}
		}
	}
	p = store.ProgressParams{Group: a.n.cfg.Group, Partition: a.partition, Epoch: a.epoch, Checkpoint: checkpoint,
		Positions: changed, Repositions: repositions}
	due := a.n.cfg.TrimInterval
	if a.stored <= a.watermark && !a.timed {
		// Nothing retention may let go, unless it was set since: look
		// again now and then.
		due *= idleTrims
	}
	if time.Since(a.trimmedTime) >= due {
		p.Trim = trimBatch
	}
	return p, checkpoint != a.proposed || len(changed) > 0 || p.Trim > 0
}

// save hands the agent's progress to the node's saver, which stores the
// progress of all its partitions in one transaction, at most once per
// ProgressInterval.
func (a *agent) save() {
	if time.Since(a.submitted) < a.n.cfg.ProgressInterval {
		return
	}
	a.submitted = time.Now()
	if p, ok := a.progress(); ok {
		a.n.saver.submit(a, p)
	}
}

// saved is what the saver did with an agent's progress.
type saved struct {
	p   store.ProgressParams
	res store.ProgressResult
	err error
}

// applySaved takes note of stored progress; a fenced partition stops the
// agent.
func (a *agent) applySaved(o saved) {
	switch {
	case o.err != nil:
		a.log.Warn("sluice: cannot store stream progress", "err", o.err)
		return
	case errors.Is(o.res.Err, sluicetype.ErrFenced):
		a.stopFenced(o.res.Err)
		return
	}
	a.proposed, a.stored = o.p.Checkpoint, o.res.Checkpoint
	for id, pos := range o.p.Positions {
		if s, ok := a.subs[id]; ok {
			s.saved = pos
		}
	}
	a.statsMu.Lock()
	a.stats.SavedAt = time.Now()
	if o.p.Trim > 0 {
		// A trim that stopped at its bound leaves the watermark below
		// the checkpoint: the next goes a TrimInterval later, as any.
		a.watermark, a.trimmedTime, a.timed = o.res.TrimmedThrough, time.Now(), o.res.Timed
		a.stats.TrimmedAt = a.trimmedTime
	}
	a.statsMu.Unlock()
}

// shutdown stops admitting work, waits for deliveries in progress until
// ctx ends, then cancels the rest, and stores final progress.
func (a *agent) shutdown(ctx context.Context) {
wait:
	for a.inflightTotal() > 0 {
		select {
		case r := <-a.results:
			a.resolve(r)
		case <-ctx.Done():
			break wait
		}
	}
	// What is still in delivery is cancelled, and reports at once, but a
	// handler that ignores its context: the agent walks away from those,
	// which end, and report to nobody, whenever they return.
	a.cancel()
	for !a.inDelivery.onlyHandlers() {
		select {
		case r := <-a.results:
			a.resolve(r)
		case <-a.inDelivery.changed:
		}
	}
	a.drainResults()
	a.wg.Wait() // lagging reads, which the cancel ends
	for _, s := range a.subs {
		s.dropReplays(errAgentStopped)
	}
	a.finalSave()
}

// finalSave stores the agent's last progress itself, after any batch of
// the saver that holds an older one.
func (a *agent) finalSave() {
	if a.err != nil {
		return // fenced: nothing more may be written
	}
	a.n.saver.drop(a)
	a.n.saver.flushing.Lock()
	defer a.n.saver.flushing.Unlock()
	select {
	case o := <-a.savedCh:
		a.applySaved(o)
	default:
	}
	if p, ok := a.progress(); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := a.n.st.SaveProgress(ctx, []store.ProgressParams{p})
		cancel()
		o := saved{p: p, err: err}
		if err == nil {
			o.res = res[0]
		}
		a.applySaved(o)
	}
	a.publishStats()
}

func (a *agent) inflightTotal() int {
	n := 0
	for _, s := range a.subs {
		n += s.inflight
	}
	return n
}
