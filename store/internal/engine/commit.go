package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Group commit. Enqueues, appends and settles go to a committer goroutine
// instead of opening a transaction each. The committer takes the first
// waiting request and every other one already waiting, up to a bound, and
// runs them all in one transaction: under load many writes share one
// commit (one fsync), and at low load a lone request runs at once, with no
// timer adding latency.

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
	e    *Engine
	reqs chan *writeReq
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func startCommitter(e *Engine, n int) *committer {
	c := &committer{e: e, reqs: make(chan *writeReq), quit: make(chan struct{})}
	for range n {
		c.wg.Add(1)
		go c.loop()
	}
	return c
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
	select {
	case c.reqs <- r:
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

func (c *committer) loop() {
	defer c.wg.Done()
	for {
		var first *writeReq
		select {
		case first = <-c.reqs:
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
				case r := <-c.reqs:
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
		c.run(batch)
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
	if len(live) == 0 {
		return
	}
	err := c.commit(live)
	switch {
	case errors.Is(err, sluicetype.ErrOutcomeUnknown):
		c.unknown(live, err)
	case err != nil && len(live) > 1:
		for _, r := range live {
			c.finish([]*writeReq{r}, c.commit([]*writeReq{r}))
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
		c.finish([]*writeReq{r}, c.commit([]*writeReq{r}))
	}
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
		}
		close(r.done)
	}
}

func (c *committer) commit(batch []*writeReq) error {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	reset := func() {
		for _, r := range batch {
			r.seqs, r.appRes, r.settled, r.leased, r.err, r.signals = nil, store.AppendResult{}, nil, nil, nil, nil
			r.appendedAt = 0
			r.allSeqs, r.routed = nil, nil
		}
	}
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
