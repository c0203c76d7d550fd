package engine

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Group commit. Enqueues, appends, settles and leases go to a commit
// pipeline instead of opening a transaction each. A pipeline's goroutine
// takes the first waiting request and every other one already waiting, up
// to a bound, and runs them all in one transaction: under load many writes
// share one commit (one fsync), and at low load a lone request runs at
// once, with no timer adding latency.
//
// A committer runs several pipelines, each on a connection of its own, and
// routes every request by its entity: the sends of a queue (which take
// numbers from its counter row) to one pipeline of the producers' half,
// its leases and settles (which work on message rows and never lock the
// counter row) to one of the consumers' half, a partition's appends to one
// of the producers' half. Numbering stays
// gap-free and in commit order per entity, because one entity's numbers
// are taken by one pipeline at a time, under its counter row's lock;
// independent entities, and the producers and consumers of one queue, no
// longer wait for each other's commits. Pipelines cannot deadlock: every
// group takes its locks in the one order apply documents, and a deadlock
// the database reports all the same is retried.

// Bounds of one group transaction.
const (
	maxGroupRequests = 256
	maxGroupBytes    = 8 << 20
	// maxYields bounds the yields before a group is closed.
	maxYields = 3
	// groupTimeout bounds one group transaction, retries included.
	groupTimeout = 60 * time.Second
)

// writeReq is one caller's write, waiting for its group to commit.
type writeReq struct {
	ctx    context.Context
	t      store.Tenant
	enq    *store.EnqueueParams
	app    *store.AppendParams
	settle *store.SettleParams
	lease  *store.LeaseParams
	// all enqueues to several queues, all or nothing: apply splits it
	// into children, one enqueue each, grouped with the other enqueues of
	// their queues.
	all *store.EnqueueAllParams
	// needsTx marks an enqueue that one statement could not write (a
	// missing queue, or one with duplicate detection): it is not tried
	// again that way.
	needsTx bool

	// Results, reset before each attempt of the transaction.
	allSeqs [][]int64
	routed  []int64
	seqs    []int64
	appRes  store.AppendResult
	// appendedAt is when an append's records were appended (ms).
	appendedAt int64
	settled    []store.SettleResult
	leased     []sluicetype.Leased
	queue      queueRow
	err        error
	signals    []string
	// floor is what a lease statement saw of the queue's ready floor,
	// heard once the group has committed (capability ReadyFloor).
	floor *floorSeen
	// keys are the entities whose counter or head rows the request takes,
	// read from its parameters when it is submitted, for stalls.
	keys []entityKey

	done chan struct{}
}

func (r *writeReq) size() int {
	n := 0
	switch {
	case r.enq != nil:
		for i := range r.enq.Messages {
			n += r.enq.Messages[i].MessageSize()
		}
	case r.app != nil:
		for i := range r.app.Records {
			n += len(r.app.Records[i].Payload)
		}
	case r.all != nil:
		n = allSize(r.t, r.all)
	}
	return n
}

type committer struct {
	e      *Engine
	pipes  []*pipe
	seed   maphash.Seed
	stalls stalls
	quit   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// startCommitter starts n commit pipelines; maxStalled groups may wait
// at once (see stalls).
func startCommitter(e *Engine, n, maxStalled int) *committer {
	c := &committer{e: e, pipes: make([]*pipe, n), seed: maphash.MakeSeed(), quit: make(chan struct{})}
	c.stalls = stalls{max: maxStalled, lanes: make(map[entityKey][]*lane)}
	for i := range c.pipes {
		c.pipes[i] = &pipe{reqs: make(chan *writeReq)}
		c.wg.Add(1)
		go c.loop(c.pipes[i])
	}
	return c
}

// pipeline returns the pipeline of r's entity. Producers' writes (sends
// and appends) go to the first half of the pipelines, consumers' (leases
// and settles) to the second, each by a hash of its entity: a consumer's
// receive never waits behind a producer's commit, and the sends of many
// queues meet in few groups, which a dialect that pipelines commits in one
// round trip and one commit.
func (c *committer) pipeline(r *writeReq) chan *writeReq {
	n := uint64(len(c.pipes))
	if n == 1 {
		return c.pipes[0].reqs
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(r.t.Service)
	h.WriteByte(0)
	h.WriteString(r.t.Provider)
	h.WriteByte(0)
	sends := (n + 1) / 2 // the first half; the rest receive
	from, width := uint64(0), sends
	switch {
	case r.enq != nil:
		h.WriteString(r.enq.Queue)
	case r.all != nil:
		// The entity whose lock the group takes first: the one whose
		// duplicate check the send passes, or its first queue.
		if len(r.all.Arrivals) > 0 {
			h.WriteString(r.all.Arrivals[0].Queue)
		} else if len(r.all.Batches) > 0 {
			h.WriteString(r.all.Batches[0].Queue)
		}
	case r.app != nil:
		h.WriteByte(1) // no queue name starts with a control character
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(r.app.Partition))
		h.Write(b[:])
	case r.settle != nil:
		h.WriteString(r.settle.Queue)
		from, width = sends, n-sends
	case r.lease != nil:
		h.WriteString(r.lease.Queue)
		from, width = sends, n-sends
	}
	return c.pipes[from+h.Sum64()%width].reqs
}

// stop makes new submissions fail with ErrClosed and waits for the groups
// in progress to finish.
func (c *committer) stop() {
	c.once.Do(func() { close(c.quit) })
	c.wg.Wait()
}

// submit hands r to a committer and waits for its outcome. If ctx ends
// first, the write may or may not have been committed.
func (c *committer) submit(ctx context.Context, r *writeReq) error {
	r.ctx = ctx
	r.done = make(chan struct{})
	if c.stalls.max > 0 {
		r.keys = r.entities()
	}
	select {
	case c.pipeline(r) <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.quit:
		return sluicetype.ErrClosed
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop runs one pipeline: it takes the first request waiting in its
// channel, and with it every other one already waiting, and commits them
// as a group. It returns when the committer stops, or when a stalled
// group made another goroutine take the pipeline over.
func (c *committer) loop(p *pipe) {
	defer c.wg.Done()
	reqs := p.reqs
	for {
		var first *writeReq
		select {
		case first = <-reqs:
		case <-c.quit:
			return
		}
		// Yield before draining, so that goroutines that are runnable
		// (callers of the last group, just woken, building their next
		// request) submit first and join this group rather than the next;
		// again while a yield brings more, a few times at most. A lone
		// request loses nothing: nothing else is runnable.
		batch := []*writeReq{first}
		bytes := first.size()
		for range maxYields {
			runtime.Gosched()
			n := len(batch)
		drain:
			for len(batch) < maxGroupRequests && bytes < maxGroupBytes {
				select {
				case r := <-reqs:
					batch = append(batch, r)
					bytes += r.size()
				default:
					break drain
				}
			}
			if len(batch) == n {
				break
			}
		}
		if batch = c.stalls.holdBack(batch); len(batch) == 0 {
			continue
		}
		if c.runWatched(p, batch) {
			return
		}
	}
}

// run commits a group. If the group as a whole fails, and so applied
// nothing, each request is retried alone, so that one request's failure
// is not every request's. If the group may have been applied all the
// same (ErrOutcomeUnknown), running its requests again could apply them
// twice: see unknown.
func (c *committer) run(batch []*writeReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if live = c.pipelined(live); len(live) == 0 {
		return
	}
	err := c.commit(live)
	switch {
	case errors.Is(err, sluicetype.ErrOutcomeUnknown):
		c.unknown(live, err)
	case err != nil && len(live) > 1:
		// Nothing was applied: each runs again alone, unless its caller
		// gave up meanwhile (a group may have run up to groupTimeout).
		for _, r := range live {
			c.finish([]*writeReq{r}, c.again(r))
		}
	default:
		c.finish(live, err)
	}
}

// unknown finishes the requests of a group whose commit may or may not
// have been applied: each write reports err, and none runs again (a send
// run again would be stored twice). Leases are the exception: they run
// again alone. A lease whose reply was lost locked its messages under a
// token no caller holds; they come back when that lock ends, their
// delivery counted, as after a receiver that crashed. Running it again
// cannot apply anything twice: it takes what is available now, or fails
// as the connection fails.
func (c *committer) unknown(batch []*writeReq, err error) {
	var leases []*writeReq
	for _, r := range batch {
		if r.lease != nil {
			leases = append(leases, r)
			continue
		}
		c.finish([]*writeReq{r}, err)
	}
	for _, r := range leases {
		c.finish([]*writeReq{r}, c.again(r))
	}
}

// again runs r alone after its group failed, or reports its context's
// error if its caller has given up.
func (c *committer) again(r *writeReq) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	return c.commit([]*writeReq{r})
}

func (c *committer) finish(batch []*writeReq, err error) {
	for _, r := range batch {
		if err != nil {
			r.err = err
		}
		switch {
		case r.app != nil && r.err == nil:
			c.e.hub.Appended(PartitionKey(r.t, r.app.Partition), r.appended)
		case r.app != nil:
			// It may have committed all the same: followers read.
			c.e.hub.Signal(PartitionKey(r.t, r.app.Partition))
		case r.err == nil, errors.Is(r.err, sluicetype.ErrOutcomeUnknown):
			// (Perhaps committed: a leaser woken for nothing looks again.)
			for _, key := range r.signals {
				c.e.hub.Signal(key)
			}
			if r.floor != nil && r.err == nil {
				c.e.noteReadyFloor(r.t, r.lease.Queue, r.floor.floor, r.floor.next)
			}
		}
		close(r.done)
	}
}

func (c *committer) commit(batch []*writeReq) error {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	reset := func() { resetResults(batch) }
	done := false
	err := c.e.retry(ctx, func() (err error) {
		reset()
		done, err = c.e.runAlone(ctx, batch)
		return err
	})
	if done || err != nil {
		return err
	}
	if c.e.d.CopyFrom != nil {
		return c.e.inConnTx(ctx, func(conn *sql.Conn, tx *sql.Tx) error {
			reset()
			gt := newGroupTx(tx)
			gt.conn = conn
			return c.apply(ctx, gt, batch)
		})
	}
	return c.e.inTx(ctx, func(tx *sql.Tx) error {
		reset()
		return c.apply(ctx, newGroupTx(tx), batch)
	})
}

// groupTx is one group's transaction with the queue rows it has read, so
// that the settles, enqueues and leases of one queue in a group read its
// row once. Settings cannot change under a group (they are read in its
// transaction), and the clock reading is refreshed by every read of the
// row; one taken a moment earlier in the same transaction serves as well.
type groupTx struct {
	tx querier
	// conn is the connection tx runs on, for the dialect's CopyFrom; nil
	// when the group runs on a caller's transaction or the dialect has no
	// CopyFrom.
	conn   *sql.Conn
	queues map[queueID]queueRow
	// bodies holds the shared bodies the transaction stored.
	bodies map[bodyKey]int64
}

type queueID struct {
	t    store.Tenant
	name string
}

func newGroupTx(tx querier) *groupTx {
	return &groupTx{tx: tx, queues: make(map[queueID]queueRow)}
}

// queue returns the row of a queue, reading it at most once per group.
func (g *groupTx) queue(ctx context.Context, e *Engine, t store.Tenant, name string) (queueRow, error) {
	if qr, ok := g.queues[queueID{t, name}]; ok {
		return qr, nil
	}
	qr, err := e.getQueue(ctx, g.tx, t, name)
	if err == nil {
		g.queues[queueID{t, name}] = qr
	}
	return qr, err
}

// apply writes a group in one lock order: message rows of settles (by
// tenant, queue, sequence number), then the counter rows of the entities
// whose duplicate checks routed sends pass (by tenant, entity: see
// checkArrivals), then queue counter rows (by tenant, queue), then the
// counter rows of the queues routed sends went to (by
// tenant, queue), then partition head rows (by tenant, partition). Leases come
// last: they skip rows others hold, so they never wait, and they can take
// messages enqueued or abandoned by the same group.
func (c *committer) apply(ctx context.Context, tx *groupTx, batch []*writeReq) error {
	var settles, enqueues, appends, leases []*writeReq
	var alls []allReq
	for _, r := range batch {
		switch {
		case r.settle != nil:
			settles = append(settles, r)
		case r.enq != nil:
			enqueues = append(enqueues, r)
		case r.all != nil:
			alls = append(alls, newAllReq(r))
		case r.app != nil:
			appends = append(appends, r)
		case r.lease != nil:
			leases = append(leases, r)
		}
	}
	for _, g := range groupBy(settles, func(r *writeReq) string { return r.settle.Queue }) {
		if err := c.e.settleGroup(ctx, tx, g); err != nil {
			return err
		}
	}
	if err := c.e.checkArrivals(ctx, tx, alls); err != nil {
		return err
	}
	if err := c.e.shareBodies(ctx, tx, alls); err != nil {
		return err
	}
	for _, a := range alls {
		enqueues = append(enqueues, a.kept()...)
	}
	for _, g := range groupBy(enqueues, func(r *writeReq) string { return r.enq.Queue }) {
		if err := c.e.enqueueGroup(ctx, tx, g); err != nil {
			return err
		}
	}
	for _, a := range alls {
		if err := c.e.finishAll(ctx, tx, a); err != nil {
			return err
		}
	}
	if err := c.e.numberAllRouted(ctx, tx, alls); err != nil {
		return err
	}
	for _, g := range groupBy(appends, func(*writeReq) string { return "" }) { // by tenant
		if err := c.e.appendTenant(ctx, tx.tx, g); err != nil {
			return err
		}
	}
	for _, g := range groupBy(leases, func(r *writeReq) string { return r.lease.Queue }) {
		if err := c.e.leaseGroup(ctx, tx, g); err != nil {
			return err
		}
	}
	return nil
}

// groupBy splits requests into groups of one tenant and one key, sorted by
// tenant then key, keeping arrival order inside a group.
func groupBy[K cmp.Ordered](reqs []*writeReq, key func(*writeReq) K) [][]*writeReq {
	sorted := slices.Clone(reqs)
	slices.SortStableFunc(sorted, func(a, b *writeReq) int {
		return cmp.Or(
			cmp.Compare(a.t.Service, b.t.Service),
			cmp.Compare(a.t.Provider, b.t.Provider),
			cmp.Compare(key(a), key(b)),
		)
	})
	var groups [][]*writeReq
	for i, r := range sorted {
		if i > 0 && r.t == sorted[i-1].t && key(r) == key(sorted[i-1]) {
			groups[len(groups)-1] = append(groups[len(groups)-1], r)
			continue
		}
		groups = append(groups, []*writeReq{r})
	}
	return groups
}
