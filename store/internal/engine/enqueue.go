package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

func (s *tenantStore) Enqueue(ctx context.Context, p *store.EnqueueParams) ([]int64, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: enqueue: %w", err)
	}
	r := &writeReq{t: s.t, enq: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("sluice: enqueue: %w", err)
	}
	return r.seqs, nil
}

// enqueueGroup writes the enqueues of one queue: it takes sequence numbers
// for all of them with one update of the queue's counter row (held until
// commit, so numbers are gap-free and in commit order), then inserts the
// messages in bulk.
func (e *Engine) enqueueGroup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	t, queue := group[0].t, group[0].enq.Queue
	if e.enqueueInOne(group) {
		err := e.enqueueMessages(ctx, gt.tx, group)
		if !errors.Is(err, errNeedsTx) {
			return err
		}
	}
	n := 0
	for _, r := range group {
		n += len(r.enq.Messages)
	}
	qr, ok, err := e.groupQueue(ctx, gt, group, queue)
	if !ok {
		return err
	}
	if qr.settings.RequiresSession {
		if group = withSessions(group); len(group) == 0 {
			return nil
		}
		n = 0
		for _, r := range group {
			n += len(r.enq.Messages)
		}
	}
	if qr.settings.DuplicateDetectionWindow > 0 {
		return e.enqueueDedup(ctx, gt, group)
	}
	qr, err = e.reserveSeqs(ctx, gt, t, queue, n)
	if errors.Is(err, sluicetype.ErrQueueNotFound) {
		for _, r := range group {
			r.err = err
		}
		return nil
	}
	if err != nil {
		return err
	}
	seq := qr.lastSeq - int64(n)
	rows := make([]messageRow, 0, n)
	for _, r := range group {
		r.seqs = make([]int64, len(r.enq.Messages))
		for i := range r.enq.Messages {
			seq++
			r.seqs[i] = seq
			row, err := newMessageRow(&r.enq.Messages[i], seq, qr)
			if err != nil {
				return err
			}
			gt.share(t, &row, r.enq.Messages[i].Payload)
			rows = append(rows, row)
		}
		r.signals = []string{QueueKey(t, queue)}
	}
	if err := e.insertMessages(ctx, gt, t, queue, qr.now, rows); err != nil {
		return err
	}
	if err := e.activateSessions(ctx, gt.tx, t, &qr, rows); err != nil {
		return err
	}
	if e.d.Capabilities.NotifyOnReserve {
		return nil
	}
	return e.notify(ctx, gt.tx, QueueKey(t, queue))
}

// reserveSeqs takes n sequence numbers of a queue, locking its counter row
// until commit, and returns the queue's row with the new last number.
func (e *Engine) reserveSeqs(ctx context.Context, gt *groupTx, t store.Tenant, queue string, n int) (queueRow, error) {
	qr, err := gt.queue(ctx, e, t, queue)
	if err != nil {
		return qr, err
	}
	if qr.lastSeq, err = e.takeSeqs(ctx, gt.tx, t, queue, n); err != nil {
		return qr, err
	}
	gt.queues[queueID{t, queue}] = qr
	return qr, nil
}

// takeSeqs takes n sequence numbers from a queue's counter row, locking it
// until commit, and returns the new last number.
func (e *Engine) takeSeqs(ctx context.Context, tx querier, t store.Tenant, queue string, n int) (int64, error) {
	var last int64
	if e.d.Capabilities.LastInsertID {
		st, err := e.stmt(ctx, tx, qReserveSeqs)
		if err != nil {
			return 0, err
		}
		res, err := st.ExecContext(ctx, n, t.Service, t.Provider, queue)
		if err != nil {
			return 0, fmt.Errorf("ReserveSeqs: %w", err)
		}
		affected, err := res.RowsAffected()
		if err == nil && affected == 0 {
			// Deleted since the group read it.
			return 0, fmt.Errorf("queue %q: %w", queue, sluicetype.ErrQueueNotFound)
		}
		if err == nil {
			last, err = res.LastInsertId()
		}
		if err != nil {
			return 0, fmt.Errorf("ReserveSeqs: %w", err)
		}
		return last, nil
	}
	args := []any{n, t.Service, t.Provider, queue}
	if e.d.Capabilities.NotifyOnReserve {
		args = append(args, e.payload(tx, QueueKey(t, queue)))
	}
	err := e.queryRow(ctx, tx, qReserveSeqs, args, &last)
	if errors.Is(err, sql.ErrNoRows) {
		// Deleted since the group read it.
		return 0, fmt.Errorf("queue %q: %w", queue, sluicetype.ErrQueueNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("ReserveSeqs: %w", err)
	}
	return last, nil
}

func newMessageRow(m *store.NewMessage, seq int64, qr queueRow) (messageRow, error) {
	body, err := newBody(m)
	row := messageRow{Seq: seq, State: int(sluicetype.StateReady), messageBody: body}
	ttl := m.TTL
	if ttl >= store.Forever {
		ttl = 0 // never, unless the queue's default caps it
	}
	if def := qr.settings.DefaultTTL; def > 0 && (ttl == 0 || ttl > def) {
		ttl = def
	}
	// The time-to-live counts from when the message becomes available:
	// now, or its scheduled time (Service Bus enqueues a scheduled message
	// then).
	from := qr.now
	if at := timeMS(m.VisibleAt); !m.VisibleAt.IsZero() && at > qr.now {
		from = at
		row.State = int(sluicetype.StateScheduled)
		row.VisibleAt = ptr(from)
	}
	if ttl > 0 && ttl < store.Forever {
		row.ExpiresAt = ptr(from + ms(ttl))
	}
	return row, err
}

// insertMessages inserts numbered messages: in bulk, as JSON chunks, or
// one statement a row where the dialect has InsertMessage (SQLite, where a
// statement costs no round trip and binding beats decoding JSON).
func (e *Engine) insertMessages(ctx context.Context, gt *groupTx, t store.Tenant, queue string, now int64, rows []messageRow) error {
	tx := gt.tx
	if gt.conn != nil && e.d.CopyFrom != nil && len(rows) >= copyMinRows {
		return e.copyMessages(ctx, gt.conn, t, queue, now, rows)
	}
	if e.d.Capabilities.RowInserts {
		for _, r := range rows {
			payload := payloadBytes(r.Payload)
			if _, err := e.exec(ctx, tx, qInsertMessage, t.Service, t.Provider, queue, r.Seq, r.State,
				nullable(r.VisibleAt), nullable(r.ExpiresAt), now,
				r.MessageID, r.SessionID, r.PartitionKey, r.ContentType, nullable(r.Properties), payload,
				nullable(r.Headers), nullable(r.BodyID)); err != nil {
				return err
			}
		}
		return nil
	}
	if e.d.Capabilities.ArrayInserts {
		return e.insertMessageArrays(ctx, tx, t, queue, now, rows)
	}
	for _, c := range chunks(len(rows), func(i int) int { return 2*len(rows[i].Payload) + 64 }) {
		js, err := jsonText(rows[c[0]:c[1]])
		if err != nil {
			return err
		}
		if _, err := e.exec(ctx, tx, qInsertMessages, t.Service, t.Provider, queue, now, js); err != nil {
			return err
		}
	}
	return nil
}

// insertMessageArrays inserts numbered messages as one array a column,
// in chunks of at most maxChunkRows rows and about maxChunkBytes of
// payload (see Capabilities.ArrayInserts).
func (e *Engine) insertMessageArrays(ctx context.Context, tx querier, t store.Tenant, queue string, now int64, rows []messageRow) error {
	for _, c := range chunks(len(rows), func(i int) int { return len(rows[i].Payload) + 64 }) {
		part := rows[c[0]:c[1]]
		n := len(part)
		var (
			seqs                              = make([]int64, n)
			states                            = make([]int16, n)
			visibleAts, expiresAts, bodyIDs   = make([]*int64, n), make([]*int64, n), make([]*int64, n)
			messageIDs, sessionIDs, partKeys  = make([]*string, n), make([]*string, n), make([]*string, n)
			contentTypes, properties, headers = make([]*string, n), make([]*string, n), make([]*string, n)
			payloads                          = make([][]byte, n)
		)
		for i := range part {
			r := &part[i]
			seqs[i], states[i] = r.Seq, int16(r.State)
			visibleAts[i], expiresAts[i], bodyIDs[i] = r.VisibleAt, r.ExpiresAt, r.BodyID
			messageIDs[i], sessionIDs[i], partKeys[i] = nonEmpty(r.MessageID), nonEmpty(r.SessionID), nonEmpty(r.PartitionKey)
			contentTypes[i], properties[i], headers[i] = nonEmpty(r.ContentType), r.Properties, r.Headers
			payloads[i] = payloadBytes(r.Payload)
		}
		if _, err := e.exec(ctx, tx, qInsertMessages, t.Service, t.Provider, queue, now, seqs, states, visibleAts,
			expiresAts, messageIDs, sessionIDs, partKeys, contentTypes, properties, payloads, bodyIDs, headers); err != nil {
			return err
		}
	}
	return nil
}

// copyMinRows is the smallest group of messages a dialect with CopyFrom
// loads by COPY: at 100 messages of 1 KiB one statement of arrays inserts
// as fast as a COPY in a transaction, at 1,000 COPY runs three times as
// fast (docs/benchmarks.md).
const copyMinRows = 256

// messageColumns are the columns copyMessages loads, in its rows' order.
var messageColumns = []string{"service", "provider", "queue", "seq", "state", "visible_at", "expires_at",
	"delivery_count", "enqueued_at", "message_id", "session_id", "partition_key", "content_type",
	"properties", "payload", "body_id", "headers"}

// copyMessages inserts numbered messages with the dialect's CopyFrom on
// the connection of the group's transaction.
func (e *Engine) copyMessages(ctx context.Context, conn *sql.Conn, t store.Tenant, queue string, now int64, rows []messageRow) error {
	values := make([][]any, len(rows))
	for i := range rows {
		r := &rows[i]
		payload := payloadBytes(r.Payload)
		values[i] = []any{t.Service, t.Provider, queue, r.Seq, int16(r.State), orNull(r.VisibleAt), orNull(r.ExpiresAt),
			int32(0), now, orNull(nonEmpty(r.MessageID)), orNull(nonEmpty(r.SessionID)), orNull(nonEmpty(r.PartitionKey)),
			orNull(nonEmpty(r.ContentType)), orNull(r.Properties), payload, orNull(r.BodyID), orNull(r.Headers)}
	}
	err := conn.Raw(func(dc any) error {
		return e.d.CopyFrom(ctx, dc, "sluice_messages", messageColumns, values)
	})
	if err != nil {
		return fmt.Errorf("copy messages: %w", err)
	}
	return nil
}

// orNull is *p, or an untyped nil (NULL) for a nil p.
func orNull[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// notify tells other processes, where the dialect can, that key changed;
// the message is delivered when the transaction commits.
func (e *Engine) notify(ctx context.Context, tx querier, key string) error {
	if !e.d.Capabilities.Notify {
		return nil
	}
	_, err := tx.ExecContext(ctx, e.q[qNotify], e.payload(tx, key))
	return err
}
