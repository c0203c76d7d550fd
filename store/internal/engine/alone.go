package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Groups one statement can commit. On a server every statement is a round
// trip, and a transaction adds two more (BEGIN, COMMIT). Where the dialect
// has the statements (PostgreSQL), a group of one kind of request to one
// queue runs as one statement outside an explicit transaction: enqueues
// (EnqueueMessages), completions (CompleteMessages) or leases
// (LeaseAlone); so does a group of appends of one tenant, to any of its
// partitions (AppendRecords). Under light load nearly every group is one
// of these, so this path sets latency; under heavy load groups mix kinds
// and run in a transaction, where EnqueueMessages, CompleteMessages and
// AppendRecords still save round trips.

// runAlone commits batch with one statement if it can, reporting whether
// it did. A lease finds out only in the statement that a lease or schedule
// of the queue has ended; it then takes nothing and reports false, and the
// group runs in a transaction that resolves those rows first. The
// statement commits by itself: a connection lost before its reply leaves
// its outcome unknown (see committed).
func (e *Engine) runAlone(ctx context.Context, batch []*writeReq) (bool, error) {
	first := batch[0]
	for _, r := range batch[1:] {
		if r.t != first.t || r.kind() != first.kind() || r.queueName() != first.queueName() {
			return false, nil
		}
	}
	switch {
	case first.enq != nil && e.enqueueInOne(batch):
		err := e.enqueueMessages(ctx, e.w, batch)
		if errors.Is(err, errNeedsTx) {
			for _, r := range batch {
				r.needsTx = true
			}
			return false, nil
		}
		return true, e.committed(err)
	case first.settle != nil && e.d.Capabilities.CompleteStatement && allComplete(batch):
		return true, e.committed(e.completeGroup(ctx, e.w, batch))
	case first.lease != nil && e.d.Capabilities.LeaseStatement:
		done, err := e.leaseAlone(ctx, batch)
		return done, e.committed(err)
	case first.app != nil && e.appendInOne(batch):
		return true, e.committed(e.appendRecords(ctx, e.w, batch))
	}
	return false, nil
}

// kind tells requests of different operations apart.
func (r *writeReq) kind() int {
	switch {
	case r.enq != nil:
		return 1
	case r.settle != nil:
		return 2
	case r.lease != nil:
		return 3
	case r.all != nil:
		return 5
	}
	return 4
}

// queueName is the queue a request names ("" for an append).
func (r *writeReq) queueName() string {
	switch {
	case r.enq != nil:
		return r.enq.Queue
	case r.settle != nil:
		return r.settle.Queue
	case r.lease != nil:
		return r.lease.Queue
	}
	return ""
}

// enqueueInOne reports whether EnqueueMessages can write a group of
// enqueues to one queue: the dialect has it and the rows fit one chunk.
func (e *Engine) enqueueInOne(group []*writeReq) bool {
	if !e.d.Capabilities.EnqueueStatement {
		return false
	}
	n, bytes := 0, 0
	for _, r := range group {
		if r.needsTx {
			return false
		}
		n += len(r.enq.Messages)
		bytes += r.size()
	}
	if e.d.CopyFrom != nil && n >= copyMinRows {
		return false // the general path loads it by COPY
	}
	return n <= maxChunkRows && 2*bytes+64*n <= maxChunkBytes
}

// errNeedsTx reports a group that one statement could not write: it needs
// the general path, in a transaction.
var errNeedsTx = errors.New("group needs a transaction")

// enqueueMessages writes a group of enqueues to one queue with one
// statement that takes the sequence numbers and inserts the messages,
// unless the queue is missing or detects duplicates (errNeedsTx).
func (e *Engine) enqueueMessages(ctx context.Context, q querier, group []*writeReq) error {
	s, err := e.enqueueStmt(q, group)
	if err != nil {
		return err
	}
	if err := e.runStmt(ctx, q, s); err != nil {
		return err
	}
	if s.again {
		return errNeedsTx
	}
	return nil
}

// enqueueStmt is EnqueueMessages for a group of enqueues to one queue
// (EnqueueMessage, its scalar form, for a group of one message). A
// queue that is missing or detects duplicates returns no row: the
// statement wrote nothing, and again is set, for the general path, which
// tells which and handles both.
func (e *Engine) enqueueStmt(q querier, group []*writeReq) (*pipedStmt, error) {
	t, queue := group[0].t, group[0].enq.Queue
	var cols newColumns
	for _, r := range group {
		for i := range r.enq.Messages {
			if err := cols.add(&r.enq.Messages[i]); err != nil {
				return nil, err
			}
		}
	}
	n := len(cols.payloads)
	key := QueueKey(t, queue)
	s := &pipedStmt{name: qEnqueueMessages, reqs: group, args: []any{t.Service, t.Provider, queue, n, e.payload(q, key),
		cols.ttls, cols.visibleAts, cols.messageIDs, cols.sessionIDs, cols.partitionKeys, cols.contentTypes,
		cols.properties, cols.headers, cols.payloads}}
	if n == 1 {
		// One message: its columns as scalars (EnqueueMessage).
		s.name, s.args = qEnqueueMessage, []any{t.Service, t.Provider, queue, e.payload(q, key),
			cols.ttls[0], cols.visibleAts[0], cols.messageIDs[0], cols.sessionIDs[0], cols.partitionKeys[0], cols.contentTypes[0],
			cols.properties[0], cols.headers[0], cols.payloads[0]}
	}
	s.read = func(rs rows) error {
		if !rs.Next() {
			if err := rs.Err(); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.again = true
			for _, r := range group {
				r.needsTx = true
			}
			return nil
		}
		var last int64
		if err := rs.Scan(&last); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		seq := last - int64(n)
		for _, r := range group {
			r.seqs = make([]int64, len(r.enq.Messages))
			for i := range r.seqs {
				seq++
				r.seqs[i] = seq
			}
			r.signals = []string{key}
		}
		return nil
	}
	return s, nil
}

// newColumns are messages as EnqueueMessages takes them: a column each,
// with the requested time-to-live and visibility, which the statement
// turns into state and expiry by the database clock. A nil element is
// NULL: a field not set, as the other dialects' JSON leaves it out.
type newColumns struct {
	ttls, visibleAts                                    []*int64
	messageIDs, sessionIDs, partitionKeys, contentTypes []*string
	properties, headers                                 []*string
	payloads                                            [][]byte
}

// add appends a message to the columns.
func (c *newColumns) add(m *store.NewMessage) error {
	body, err := newBody(m)
	if err != nil {
		return err
	}
	var ttl, visibleAt *int64
	if m.TTL > 0 && m.TTL < store.Forever {
		ttl = ptr(ms(m.TTL))
	}
	if !m.VisibleAt.IsZero() {
		visibleAt = ptr(timeMS(m.VisibleAt))
	}
	payload := payloadBytes(body.Payload)
	c.ttls = append(c.ttls, ttl)
	c.visibleAts = append(c.visibleAts, visibleAt)
	c.messageIDs = append(c.messageIDs, nonEmpty(body.MessageID))
	c.sessionIDs = append(c.sessionIDs, nonEmpty(body.SessionID))
	c.partitionKeys = append(c.partitionKeys, nonEmpty(body.PartitionKey))
	c.contentTypes = append(c.contentTypes, nonEmpty(body.ContentType))
	c.properties = append(c.properties, body.Properties)
	c.headers = append(c.headers, body.Headers)
	c.payloads = append(c.payloads, payload)
	return nil
}

// nonEmpty is s, or nil (NULL) for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// leaseAlone serves a group of lease requests to one queue with
// LeaseAlone, handing messages out in arrival order, each request under a
// token of its own. It reports false, having taken nothing, when a lease
// or schedule of the queue has ended.
func (e *Engine) leaseAlone(ctx context.Context, group []*writeReq) (bool, error) {
	s, err := e.leaseStmt(group)
	if s == nil || err != nil {
		return false, err
	}
	if err := e.runStmt(ctx, e.w, s); err != nil {
		return false, err
	}
	return !s.again, nil
}

// leaseStmt is LeaseAlone for a group of lease requests to one queue; nil
// when they ask for more than one statement hands out. When a lease or
// schedule of the queue has ended, or the queue is missing or requires
// sessions, the statement takes nothing and again is set: the general
// path resolves those rows first, or tells which.
func (e *Engine) leaseStmt(group []*writeReq) (*pipedStmt, error) {
	t, queue := group[0].t, group[0].lease.Queue
	reqs := make([]leaseRequest, 0, len(group))
	total := 0
	for i, r := range group {
		if total += r.lease.Max; total > leaseChunk && i > 0 {
			return nil, nil
		}
		reqs = append(reqs, leaseRequest{Index: i, Max: r.lease.Max, Token: newToken(), Visibility: ms(r.lease.Visibility)})
	}
	js, err := jsonText(reqs)
	if err != nil {
		return nil, err
	}
	s := &pipedStmt{name: qLeaseAlone, reqs: group, args: []any{t.Service, t.Provider, queue, js, total}}
	s.read = func(rs rows) error {
		var (
			qr    queueRow
			found bool
			got   = make([][]sluicetype.Message, len(group))
			floor int64
			first = int64(-1)
		)
		for rs.Next() {
			found = true
			var (
				m   nullMessage
				req sql.NullInt64
			)
			dest := append(append(qr.scanDest(), &req), m.scanDest()...)
			if e.d.Capabilities.ReadyFloor {
				dest = append(dest, &floor)
			}
			if err := rs.Scan(dest...); err != nil {
				return fmt.Errorf("LeaseAlone: %w", err)
			}
			if !m.seq.Valid {
				continue
			}
			if req.Int64 < 0 || int(req.Int64) >= len(group) {
				return fmt.Errorf("LeaseAlone: request index %d out of range", req.Int64)
			}
			msg, err := m.message()
			if err != nil {
				return fmt.Errorf("LeaseAlone: %w", err)
			}
			if first < 0 {
				first = msg.Seq
			}
			got[req.Int64] = append(got[req.Int64], msg)
		}
		if err := rs.Err(); err != nil {
			return fmt.Errorf("LeaseAlone: %w", err)
		}
		if !found {
			s.again = true
			return nil
		}
		qr.fill(queue)
		none := true
		for _, msgs := range got {
			none = none && len(msgs) == 0
		}
		if none && qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
			s.again = true
			return nil
		}
		if e.d.Capabilities.ReadyFloor {
			if first < 0 {
				first = qr.lastSeq + 1
			}
			group[0].floor = &floorSeen{floor: floor, next: first}
		}
		for i, r := range group {
			r.queue = qr
			token := reqs[i].Token
			r.leased = make([]sluicetype.Leased, len(got[i]))
			for j, m := range got[i] {
				r.leased[j] = sluicetype.Leased{Message: m, Receipt: sluicetype.Receipt{Seq: m.Seq, Token: token}, LockedUntil: m.VisibleAt}
			}
			if len(got[i]) == r.lease.Max {
				// There may be more than this call took: wake another leaser.
				r.signals = append(r.signals, QueueKey(t, queue))
			}
		}
		return nil
	}
	return s, nil
}

// leaseRequest is one lease request as LeaseAlone takes it.
type leaseRequest struct {
	Index      int   `json:"i"`
	Max        int   `json:"n"`
	Token      int64 `json:"t"`
	Visibility int64 `json:"v"`
}
