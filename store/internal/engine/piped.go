package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Pipelined groups. A group that mixes queues or kinds of request (the
// sends of two queues, the completions and leases of a third) cannot run
// as one statement, and in a transaction it costs a round trip a
// statement plus BEGIN and COMMIT. Where the dialect can pipeline
// (PostgreSQL), the group's statements that stand alone (EnqueueMessages,
// CompleteMessages, AppendRecords and LeaseAlone, one for each queue or
// tenant) go to the server at once, in the order apply takes its locks,
// and run in one implicit transaction that commits when the last one
// ends: one round trip and one commit for the group. What needs the
// general path (other settles, sends to several queues, a statement that
// found it could not write) then runs in a transaction of its own. A
// group of one queue's requests is left to the usual paths: one statement
// when it is one kind, else a transaction, which delivered one queue with
// 8 producers and 8 consumers about a quarter faster than a pipeline of
// its completions and leases (docs/benchmarks.md).

// pipedStmt is one statement that stands alone, for a group of requests:
// a named query with its arguments, and read, which reads its rows into
// the requests' results. read sets again when the statement wrote nothing
// and the requests need the general path.
type pipedStmt struct {
	name  string
	args  []any
	reqs  []*writeReq
	read  func(rows) error
	again bool
	// readErr is read's error in a pipeline, where the statement may
	// have committed all the same.
	readErr error
}

// PipelineStmt is one statement of Dialect.Pipeline: its text, its
// arguments, and what reads its rows (which must not keep them).
type PipelineStmt struct {
	SQL  string
	Args []any
	Read func(store.Rows)
}

// runStmt runs s on q and reads its rows. It closes them before it
// returns, reporting the error that closing reads: outside a transaction
// the statement commits after its last row, and a commit that failed (or
// whose reply was lost) must not pass for a write that holds.
func (e *Engine) runStmt(ctx context.Context, q querier, s *pipedStmt) error {
	rs, err := e.query(ctx, q, s.name, s.args...)
	if err != nil {
		return err
	}
	err = s.read(rs)
	if cerr := rs.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: %w", s.name, cerr)
	}
	return err
}

// pipelined commits what it can of a group as one pipeline of statements,
// finishes those requests, and returns the rest, for the general path: all
// of them when the dialect cannot pipeline, when the group names one queue,
// when fewer than two statements would go, or when the pipeline failed
// and so applied nothing.
func (c *committer) pipelined(batch []*writeReq) []*writeReq {
	e := c.e
	if e.d.Pipeline == nil || e.noPipeline.Load() || len(batch) < 2 {
		return batch
	}
	if oneQueue(batch) {
		return batch
	}
	stmts, rest := e.pipedStmts(batch)
	if len(stmts) < 2 {
		return batch
	}
	var piped []*writeReq
	for _, s := range stmts {
		piped = append(piped, s.reqs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	err := e.retry(ctx, func() error {
		resetResults(piped)
		for _, s := range stmts {
			s.again, s.readErr = false, nil
		}
		return e.runPipeline(ctx, stmts)
	})
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		// Not pgx's connection (an application's pool of another driver).
		e.noPipeline.Store(true)
		resetResults(piped)
		return batch
	case errors.Is(err, sluicetype.ErrOutcomeUnknown):
		c.unknown(piped, err)
		return rest
	case err != nil:
		// Nothing was applied: the general path runs the group, and each
		// request alone if it fails again.
		resetResults(piped)
		return batch
	}
	var done []*writeReq
	for _, s := range stmts {
		switch {
		case s.readErr != nil:
			for _, r := range s.reqs {
				r.err = fmt.Errorf("%w: reading what %s returned: %w", sluicetype.ErrOutcomeUnknown, s.name, s.readErr)
			}
			done = append(done, s.reqs...)
		case s.again:
			resetResults(s.reqs)
			rest = append(rest, s.reqs...)
		default:
			done = append(done, s.reqs...)
		}
	}
	c.finish(done, nil)
	return rest
}

// pipedStmts splits a group into statements that stand alone, in apply's
// lock order (completions, sends, appends, leases; by tenant and queue
// within each), and the requests that need the general path.
func (e *Engine) pipedStmts(batch []*writeReq) (stmts []*pipedStmt, rest []*writeReq) {
	var completes, enqueues, appends, leases []*writeReq
	for _, r := range batch {
		switch {
		case r.settle != nil && r.settle.Action == store.Complete && e.d.Capabilities.CompleteStatement:
			completes = append(completes, r)
		case r.enq != nil && !r.needsTx && e.d.Capabilities.EnqueueStatement:
			enqueues = append(enqueues, r)
		case r.app != nil:
			appends = append(appends, r)
		case r.lease != nil && e.d.Capabilities.LeaseStatement:
			leases = append(leases, r)
		default:
			rest = append(rest, r)
		}
	}
	add := func(g []*writeReq, ok bool, build func([]*writeReq) (*pipedStmt, error)) {
		var s *pipedStmt
		var err error
		if ok {
			s, err = build(g)
		}
		if s == nil || err != nil {
			// The general path runs it, and reports err.
			rest = append(rest, g...)
			return
		}
		stmts = append(stmts, s)
	}
	for _, g := range groupBy(completes, func(r *writeReq) string { return r.settle.Queue }) {
		add(g, true, e.completeStmt)
	}
	for _, g := range groupBy(enqueues, func(r *writeReq) string { return r.enq.Queue }) {
		add(g, e.enqueueInOne(g), func(g []*writeReq) (*pipedStmt, error) { return e.enqueueStmt(e.w, g) })
	}
	for _, g := range groupBy(appends, func(*writeReq) string { return "" }) { // by tenant
		add(g, e.appendInOne(g), func(g []*writeReq) (*pipedStmt, error) { return e.appendStmt(e.w, g) })
	}
	for _, g := range groupBy(leases, func(r *writeReq) string { return r.lease.Queue }) {
		add(g, true, e.leaseStmt)
	}
	return stmts, rest
}

// runPipeline sends stmts through the dialect's Pipeline on a connection
// of the write pool. Their effects commit together, or none does; a
// connection lost before the reply leaves the outcome unknown.
func (e *Engine) runPipeline(ctx context.Context, stmts []*pipedStmt) error {
	if e.isClosed() {
		return sluicetype.ErrClosed
	}
	ps := make([]PipelineStmt, len(stmts))
	for i, s := range stmts {
		ps[i] = PipelineStmt{SQL: e.q[s.name], Args: s.args, Read: func(rs store.Rows) {
			s.readErr = s.read(rows{native: rs})
		}}
	}
	conn, err := e.w.Conn(ctx)
	if err != nil {
		return e.wrap(err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error { return e.d.Pipeline(ctx, dc, ps) })
	if errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return e.committed(err)
}

// resetResults clears what an attempt of a group left in its requests.
func resetResults(batch []*writeReq) {
	for _, r := range batch {
		r.seqs, r.appRes, r.settled, r.leased, r.err, r.signals = nil, store.AppendResult{}, nil, nil, nil, nil
		r.appendedAt = 0
		r.allSeqs, r.routed = nil, nil
		r.floor = nil
	}
}

// oneQueue reports whether every request of batch names one queue.
func oneQueue(batch []*writeReq) bool {
	for _, r := range batch[1:] {
		if r.t != batch[0].t || r.queueName() != batch[0].queueName() || r.app != nil || r.all != nil {
			return false
		}
	}
	return batch[0].app == nil && batch[0].all == nil
}
