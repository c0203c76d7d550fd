package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// dueBatch bounds how many ended leases and schedules one lease call
// promotes (or dead-letters) before it takes messages.
const dueBatch = 256

// queueRow is a queue's stored settings and control columns, read together
// with the database's clock.
type queueRow struct {
	settings store.QueueSettings
	evictAt  int64
	lastSeq  int64
	now      int64
	// nextDue is the earliest end of a lease or schedule of the queue.
	nextDue sql.NullInt64
	raw     struct {
		maxDel, evictBatch                                int
		ttl, retention, interval, dlqExpd, dedup, session int64
	}
}

// scanDest returns where the columns of GetQueue go, in order; fill
// completes the row from them once scanned.
func (r *queueRow) scanDest() []any {
	return []any{&r.raw.maxDel, &r.raw.ttl, &r.raw.dlqExpd, &r.raw.retention, &r.raw.interval,
		&r.raw.evictBatch, &r.evictAt, &r.lastSeq, &r.now, &r.nextDue, &r.raw.dedup, &r.raw.session}
}

func (r *queueRow) fill(name string) {
	r.settings = store.QueueSettings{
		Name:                name,
		MaxDeliveryCount:    r.raw.maxDel,
		DefaultTTL:          msDuration(r.raw.ttl),
		DeadLetterOnExpiry:  r.raw.dlqExpd != 0,
		DeadLetterRetention: msDuration(r.raw.retention),
		EvictionInterval:    msDuration(r.raw.interval),
		EvictionBatch:       r.raw.evictBatch,

		DuplicateDetectionWindow: msDuration(r.raw.dedup),
		RequiresSession:          r.raw.session != 0,
	}
}

func (e *Engine) getQueue(ctx context.Context, q querier, t store.Tenant, name string) (queueRow, error) {
	var r queueRow
	err := e.queryRow(ctx, q, "GetQueue", []any{t.Service, t.Provider, name}, r.scanDest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("queue %q: %w", name, sluicetype.ErrQueueNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("GetQueue: %w", err)
	}
	r.fill(name)
	return r, nil
}

// removeAt is when a dead letter made now is due for removal (NULL: never).
func (r *queueRow) removeAt() sql.NullInt64 {
	if r.settings.DeadLetterRetention <= 0 || r.settings.DeadLetterRetention >= store.Forever {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: r.now + ms(r.settings.DeadLetterRetention), Valid: true}
}

func (s *tenantStore) CreateQueue(ctx context.Context, qs *store.QueueSettings) error {
	set := qs.WithDefaults()
	if err := set.Validate(); err != nil {
		return fmt.Errorf("sluice: create queue: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.e.exec(ctx, tx, "CreateQueue", s.t.Service, s.t.Provider, set.Name,
			set.MaxDeliveryCount, ms(set.DefaultTTL), boolInt(set.DeadLetterOnExpiry),
			ms(set.DeadLetterRetention), ms(set.EvictionInterval), set.EvictionBatch, nullText(set.Attributes),
			ms(set.DuplicateDetectionWindow), boolInt(set.RequiresSession))
		return err
	})
	if errors.Is(err, ErrDuplicate) {
		return fmt.Errorf("sluice: create queue %q: %w", set.Name, sluicetype.ErrQueueExists)
	}
	if err != nil {
		return fmt.Errorf("sluice: create queue %q: %w", set.Name, err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *tenantStore) GetQueue(ctx context.Context, name string) (store.QueueSettings, error) {
	if err := store.ValidateName("queue", name); err != nil {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	r, err := s.e.getQueue(ctx, s.e.r, s.t, name)
	if err != nil {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	var attrs sql.NullString
	err = s.e.queryRow(ctx, s.e.r, "GetQueueAttributes", []any{s.t.Service, s.t.Provider, name}, &attrs)
	if errors.Is(err, sql.ErrNoRows) {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: queue %q: %w", name, sluicetype.ErrQueueNotFound)
	}
	if err != nil {
		return store.QueueSettings{}, fmt.Errorf("sluice: get queue: %w", err)
	}
	if attrs.Valid {
		r.settings.Attributes = []byte(attrs.String)
	}
	return r.settings, nil
}

// nullText binds bytes as text, or NULL when empty.
func nullText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func (s *tenantStore) UpdateQueue(ctx context.Context, qs *store.QueueSettings) error {
	set := qs.WithDefaults()
	if err := set.Validate(); err != nil {
		return fmt.Errorf("sluice: update queue: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, "UpdateQueue", set.MaxDeliveryCount, ms(set.DefaultTTL), boolInt(set.DeadLetterOnExpiry),
			ms(set.DeadLetterRetention), ms(set.EvictionInterval), set.EvictionBatch, nullText(set.Attributes),
			ms(set.DuplicateDetectionWindow), s.t.Service, s.t.Provider, set.Name)
		if err == nil && n == 0 {
			// MySQL counts changed rows: an update to the same values
			// changes none. Tell that from a missing queue.
			_, err = s.e.getQueue(ctx, tx, s.t, set.Name)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: update queue %q: %w", set.Name, err)
	}
	return nil
}

func (s *tenantStore) ListQueues(ctx context.Context, p *store.ListParams) ([]store.QueueSettings, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: list queues: %w", err)
	}
	from, to := store.PrefixRange(p.Prefix)
	rows, err := s.e.query(ctx, s.e.r, "ListQueues", s.t.Service, s.t.Provider, p.After, from, to, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: list queues: %w", err)
	}
	defer rows.Close()
	var out []store.QueueSettings
	for rows.Next() {
		var (
			r     queueRow
			name  string
			attrs sql.NullString
		)
		err := rows.Scan(&name, &r.raw.maxDel, &r.raw.ttl, &r.raw.dlqExpd, &r.raw.retention, &r.raw.interval,
			&r.raw.evictBatch, &attrs, &r.raw.dedup, &r.raw.session)
		if err != nil {
			return nil, fmt.Errorf("sluice: list queues: %w", err)
		}
		r.fill(name)
		if attrs.Valid {
			r.settings.Attributes = []byte(attrs.String)
		}
		out = append(out, r.settings)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: list queues: %w", err)
	}
	return out, nil
}

func (s *tenantStore) DeleteQueue(ctx context.Context, name string) error {
	if err := store.ValidateName("queue", name); err != nil {
		return fmt.Errorf("sluice: delete queue: %w", err)
	}
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, "DeleteQueue", s.t.Service, s.t.Provider, name)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("queue %q: %w", name, sluicetype.ErrQueueNotFound)
		}
		if _, err := s.e.exec(ctx, tx, "DeleteQueueMessages", s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, "DeleteQueueDedup", s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, "DeleteQueueSessions", s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, "DeleteQueueRoutedSchedules", s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, "DeleteQueueDeadLetters", s.t.Service, s.t.Provider, name); err != nil {
			return err
		}
		// Bodies only the queue's messages referred to go now, as far as
		// one bounded sweep reaches; eviction passes find the rest.
		_, err = s.e.sweepBodies(ctx, tx, s.t, maxChunkRows)
		return err
	})
	if err != nil {
		return fmt.Errorf("sluice: delete queue: %w", err)
	}
	return nil
}

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
	if err := e.insertMessages(ctx, gt.tx, t, queue, qr.now, rows); err != nil {
		return err
	}
	if err := e.activateSessions(ctx, gt.tx, t, &qr, rows); err != nil {
		return err
	}
	if e.d.NotifyOnReserve {
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
	if e.d.LastInsertID {
		st, err := e.stmt(ctx, tx, "ReserveSeqs")
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
	if e.d.NotifyOnReserve {
		args = append(args, e.payload(tx, QueueKey(t, queue)))
	}
	err := e.queryRow(ctx, tx, "ReserveSeqs", args, &last)
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
func (e *Engine) insertMessages(ctx context.Context, tx querier, t store.Tenant, queue string, now int64, rows []messageRow) error {
	if e.has("InsertMessage") {
		for _, r := range rows {
			payload := []byte(r.Payload)
			if payload == nil {
				payload = []byte{} // an empty payload, not NULL
			}
			if _, err := e.exec(ctx, tx, "InsertMessage", t.Service, t.Provider, queue, r.Seq, r.State,
				nullable(r.VisibleAt), nullable(r.ExpiresAt), now,
				r.MessageID, r.SessionID, r.PartitionKey, r.ContentType, nullable(r.Properties), payload,
				nullable(r.Headers), nullable(r.BodyID)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range chunks(len(rows), func(i int) int { return 2*len(rows[i].Payload) + 64 }) {
		js, err := jsonText(rows[c[0]:c[1]])
		if err != nil {
			return err
		}
		if _, err := e.exec(ctx, tx, "InsertMessages", t.Service, t.Provider, queue, now, js); err != nil {
			return err
		}
	}
	return nil
}

// notify tells other processes, where the dialect can, that key changed;
// the message is delivered when the transaction commits.
func (e *Engine) notify(ctx context.Context, tx querier, key string) error {
	if !e.notifyOn {
		return nil
	}
	_, err := tx.ExecContext(ctx, e.q["Notify"], e.payload(tx, key))
	return err
}

func (s *tenantStore) Lease(ctx context.Context, p *store.LeaseParams) ([]sluicetype.Leased, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: lease: %w", err)
	}
	r := &writeReq{t: s.t, lease: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("sluice: lease: %w", err)
	}
	if qr := r.queue; qr.evictAt <= qr.now {
		if err := s.maybeEvict(ctx, p.Queue, qr); err != nil {
			s.e.log.Warn("sluice: eviction failed", "queue", p.Queue, "err", err)
		}
	}
	return r.leased, nil
}

// groupQueue reads the queue a group of requests names. When it does not
// exist, every request of the group fails with ErrQueueNotFound, the
// transaction goes on for the other groups, and ok is false.
func (e *Engine) groupQueue(ctx context.Context, gt *groupTx, group []*writeReq, queue string) (qr queueRow, ok bool, err error) {
	qr, err = gt.queue(ctx, e, group[0].t, queue)
	if errors.Is(err, sluicetype.ErrQueueNotFound) {
		for _, r := range group {
			r.err = err
		}
		return qr, false, nil
	}
	return qr, err == nil, err
}

// leaseChunk bounds the rows one SelectReady of a lease group reads.
const leaseChunk = 2000

// leaseGroup serves the leases of one queue: it resolves ended leases and
// schedules once, reads the first ready messages in sequence order that no
// one else holds for several requests at a time (consumers woken by the
// same enqueue ask together), and hands them out in arrival order, each
// request under a fresh lock token of its own, with one update.
func (e *Engine) leaseGroup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	t, queue := group[0].t, group[0].lease.Queue
	qr, ok, err := e.groupQueue(ctx, gt, group, queue)
	if !ok {
		return err
	}
	if qr.settings.RequiresSession {
		for _, r := range group {
			r.err = fmt.Errorf("queue %q requires sessions: accept a session to receive: %w", queue, sluicetype.ErrSessionRequired)
		}
		return nil
	}
	if qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
		if _, err = e.resolveDue(ctx, gt.tx, t, &qr, dueBatch); err != nil {
			return err
		}
	}
	for _, r := range group {
		r.queue = qr
	}
	for start := 0; start < len(group); {
		end, want := start, 0
		for end < len(group) && (end == start || want+group[end].lease.Max <= leaseChunk) {
			want += group[end].lease.Max
			end++
		}
		msgs, err := e.selectReady(ctx, gt.tx, t, queue, qr.now, want)
		if err != nil {
			return err
		}
		drained := len(msgs) < want
		rows := make([]leaseRow, 0, len(msgs))
		for _, r := range group[start:end] {
			n := min(r.lease.Max, len(msgs))
			rows = leaseTo(rows, t, &qr, r, msgs[:n])
			msgs = msgs[n:]
		}
		if err := e.leaseRows(ctx, gt.tx, t, queue, rows); err != nil {
			return err
		}
		if drained {
			// The queue has no more ready messages: the rest of the group
			// gets none now.
			return nil
		}
		start = end
	}
	return nil
}

func (e *Engine) selectReady(ctx context.Context, tx querier, t store.Tenant, queue string, now int64, limit int) ([]sluicetype.Message, error) {
	rows, err := e.query(ctx, tx, "SelectReady", t.Service, t.Provider, queue, now, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := make([]sluicetype.Message, 0, min(limit, 64))
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("SelectReady: %w", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SelectReady: %w", err)
	}
	return msgs, nil
}

// leaseRows marks the rows leased, in one statement or, where the dialect
// says LeasePerRequest, one per request (per token).
func (e *Engine) leaseRows(ctx context.Context, tx querier, t store.Tenant, queue string, rows []leaseRow) error {
	if len(rows) == 0 {
		return nil
	}
	if !e.d.LeasePerRequest {
		js, err := jsonText(rows)
		if err != nil {
			return err
		}
		_, err = e.exec(ctx, tx, "LeaseMessages", t.Service, t.Provider, queue, js)
		return err
	}
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Token == rows[start].Token {
			end++
		}
		seqs := make([]int64, 0, end-start)
		for _, r := range rows[start:end] {
			seqs = append(seqs, r.Seq)
		}
		if _, err := e.exec(ctx, tx, "LeaseMessages", rows[start].Token, rows[start].Until,
			t.Service, t.Provider, queue, e.d.IntList(seqs)); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// leaseTo hands msgs to one request under a fresh token and adds the
// rows to update to rows.
func leaseTo(rows []leaseRow, t store.Tenant, qr *queueRow, r *writeReq, msgs []sluicetype.Message) []leaseRow {
	p := r.lease
	if len(msgs) == 0 {
		return rows
	}
	var mine []leaseRow
	r.leased, mine = leaseUnder(msgs, newToken(), qr.now+ms(p.Visibility))
	if len(msgs) == p.Max {
		// There may be more than this call took: wake another leaser.
		r.signals = append(r.signals, QueueKey(t, p.Queue))
	}
	return append(rows, mine...)
}

// leaseUnder hands msgs out under one token until a lock end: the leased
// messages as returned, and the rows to update.
func leaseUnder(msgs []sluicetype.Message, token, until int64) ([]sluicetype.Leased, []leaseRow) {
	leased := make([]sluicetype.Leased, len(msgs))
	rows := make([]leaseRow, len(msgs))
	for i, m := range msgs {
		m.DeliveryCount++
		m.State = sluicetype.StateLeased
		m.VisibleAt = fromMS(until)
		leased[i] = sluicetype.Leased{Message: m, Receipt: sluicetype.Receipt{Seq: m.Seq, Token: token}, LockedUntil: fromMS(until)}
		rows[i] = leaseRow{Seq: m.Seq, Token: token, Until: until}
	}
	return leased, rows
}

// resolveDue handles leased and scheduled rows whose time has come: a
// leased row on its last allowed delivery goes to dead letters, an expired
// one expires (never a deferred one, which is deferred again), and the
// rest become ready again, in sequence order with the others. Rows another transaction holds are skipped.
func (e *Engine) resolveDue(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, limit int) (store.EvictResult, error) {
	var res store.EvictResult
	rows, err := e.query(ctx, tx, "SelectDue", t.Service, t.Provider, qr.settings.Name, qr.now, limit)
	if err != nil {
		return res, err
	}
	var (
		ready, exhausted, expired []int64
		scheduled                 []dueRow
	)
	for rows.Next() {
		var (
			d        dueRow
			state    int
			count    int
			expires  sql.NullInt64
			deferred int
			mid, pk  sql.NullString
		)
		if err := rows.Scan(&d.seq, &state, &count, &expires, &deferred, &d.visibleAt, &mid, &pk); err != nil {
			rows.Close()
			return res, fmt.Errorf("SelectDue: %w", err)
		}
		switch {
		case sluicetype.MessageState(state) == sluicetype.StateLeased && count >= qr.settings.MaxDeliveryCount:
			exhausted = append(exhausted, d.seq)
		case deferred != 0:
			// A deferred message never expires: its lease ended, and it
			// is deferred again (MakeReady).
			ready = append(ready, d.seq)
		case expires.Valid && expires.Int64 <= qr.now:
			expired = append(expired, d.seq)
		case sluicetype.MessageState(state) == sluicetype.StateScheduled && count == 0:
			if mid.Valid {
				d.key = idKey(mid.String, pk.String)
			}
			scheduled = append(scheduled, d)
		default:
			ready = append(ready, d.seq)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("SelectDue: %w", err)
	}
	if len(ready) > 0 {
		slices.Sort(ready)
		if _, err := e.exec(ctx, tx, "MakeReady", t.Service, t.Provider, qr.settings.Name, e.d.IntList(ready)); err != nil {
			return res, err
		}
	}
	activated, err := e.activate(ctx, tx, t, qr, scheduled)
	if err != nil {
		return res, err
	}
	if available := append(ready, activated...); len(available) > 0 && qr.settings.RequiresSession {
		slices.Sort(available)
		if _, err := e.exec(ctx, tx, "ActivateSessions", t.Service, t.Provider, qr.settings.Name, e.d.IntList(available)); err != nil {
			return res, err
		}
	}
	desc := fmt.Sprintf("the lease ended after the last of %d allowed deliveries", qr.settings.MaxDeliveryCount)
	if err := e.deadLetter(ctx, tx, t, qr, exhausted, sluicetype.ReasonMaxDeliveryCountExceeded, desc); err != nil {
		return res, err
	}
	if err := e.expire(ctx, tx, t, qr, expired); err != nil {
		return res, err
	}
	res.Exhausted, res.Expired = int64(len(exhausted)), int64(len(expired))
	return res, nil
}

// dueRow is a scheduled message whose time has come.
type dueRow struct {
	seq       int64
	visibleAt int64
	// key is its duplicate-detection key ("" without a message id).
	key string
}

// activate appends scheduled messages whose time has come as if they were
// enqueued now, as Service Bus does: in order of their time, each takes a
// new number from the queue's counter (gap-free and in commit order, as an
// enqueue's), becomes ready and counts as enqueued now; the number it had
// while scheduled names nothing any more. On a queue with duplicate
// detection, their ids then name the new numbers. The counter row is
// taken only if no other transaction holds it, so that a lease never
// waits; otherwise the messages stay due for the next lease or eviction.
// It returns the new numbers.
func (e *Engine) activate(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, due []dueRow) ([]int64, error) {
	if len(due) == 0 {
		return nil, nil
	}
	queue := qr.settings.Name
	var last int64
	err := e.queryRow(ctx, tx, "TryLockQueue", []any{t.Service, t.Provider, queue}, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("TryLockQueue: %w", err)
	}
	if last, err = e.takeSeqs(ctx, tx, t, queue, len(due)); err != nil {
		return nil, err
	}
	qr.lastSeq = last
	slices.SortFunc(due, func(a, b dueRow) int {
		return cmp.Or(cmp.Compare(a.visibleAt, b.visibleAt), cmp.Compare(a.seq, b.seq))
	})
	mapping := make([]seqMapping, len(due))
	var keys []renumberRow
	seqs := make([]int64, len(due))
	for i, d := range due {
		seqs[i] = last - int64(len(due)-1-i)
		mapping[i] = seqMapping{Old: d.seq, New: seqs[i]}
		if d.key != "" && qr.settings.DuplicateDetectionWindow > 0 {
			keys = append(keys, renumberRow{Key: d.key, Old: d.seq, New: seqs[i]})
		}
	}
	js, err := jsonText(mapping)
	if err != nil {
		return nil, err
	}
	if _, err := e.exec(ctx, tx, "ActivateScheduled", t.Service, t.Provider, queue, js, qr.now); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return seqs, nil
	}
	if js, err = jsonText(keys); err != nil {
		return nil, err
	}
	if _, err := e.exec(ctx, tx, "RenumberDedup", t.Service, t.Provider, queue, js); err != nil {
		return nil, err
	}
	return seqs, nil
}

// renumberRow is one id of RenumberDedup.
type renumberRow struct {
	Key string `json:"k"`
	Old int64  `json:"o"`
	New int64  `json:"n"`
}

// deadLetter moves messages to dead letters.
func (e *Engine) deadLetter(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, seqs []int64, reason, desc string) error {
	if len(seqs) == 0 {
		return nil
	}
	slices.Sort(seqs)
	list := e.d.IntList(seqs)
	if _, err := e.exec(ctx, tx, "MoveToDeadLetters", reason, desc, qr.now, qr.removeAt(),
		t.Service, t.Provider, qr.settings.Name, list); err != nil {
		return err
	}
	if _, err := e.exec(ctx, tx, "DeleteMessages", t.Service, t.Provider, qr.settings.Name, list); err != nil {
		return err
	}
	e.noteDeadLetters(tx, t, qr.settings.Name, reason, len(seqs))
	return nil
}

// expire dead-letters or drops messages whose time-to-live ran out, as the
// queue says.
func (e *Engine) expire(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if qr.settings.DeadLetterOnExpiry {
		return e.deadLetter(ctx, tx, t, qr, seqs, sluicetype.ReasonTTLExpired, "the message's time-to-live ran out")
	}
	slices.Sort(seqs)
	_, err := e.exec(ctx, tx, "DeleteMessages", t.Service, t.Provider, qr.settings.Name, e.d.IntList(seqs))
	return err
}

// maybeEvict races to move the queue's control column to the next
// eviction time; the one caller that wins runs one eviction batch. So
// eviction runs about once per interval per queue, however many nodes
// lease from it.
func (s *tenantStore) maybeEvict(ctx context.Context, queue string, qr queueRow) error {
	won := false
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.e.exec(ctx, tx, "ClaimEviction", qr.now+ms(qr.settings.EvictionInterval),
			s.t.Service, s.t.Provider, queue, qr.evictAt)
		won = n == 1
		return err
	})
	if err != nil || !won {
		return err
	}
	_, err = s.evict(ctx, queue, s.e.sweeps.due(s.t, qr.settings.EvictionInterval))
	return err
}

func (s *tenantStore) Evict(ctx context.Context, queue string) (store.EvictResult, error) {
	if err := store.ValidateName("queue", queue); err != nil {
		return store.EvictResult{}, fmt.Errorf("sluice: evict: %w", err)
	}
	res, err := s.evict(ctx, queue, true)
	if err != nil {
		return res, fmt.Errorf("sluice: evict: %w", err)
	}
	return res, nil
}

// evict runs one bounded eviction batch: ended leases and schedules are
// resolved, expired messages expire, and dead letters past retention are
// removed, each step at most the queue's eviction batch; with sweep, as
// many of the tenant's shared bodies that nothing refers to any more are
// deleted.
func (s *tenantStore) evict(ctx context.Context, queue string, sweep bool) (store.EvictResult, error) {
	var res store.EvictResult
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, queue)
		if err != nil {
			return err
		}
		batch := qr.settings.EvictionBatch
		if res, err = s.e.resolveDue(ctx, tx, s.t, &qr, batch); err != nil {
			return err
		}
		expired, err := s.e.int64s(ctx, tx, "SelectExpired", s.t.Service, s.t.Provider, queue, qr.now, qr.now, batch)
		if err != nil {
			return err
		}
		if err := s.e.expire(ctx, tx, s.t, &qr, expired); err != nil {
			return err
		}
		res.Expired += int64(len(expired))
		if _, err := s.e.exec(ctx, tx, "TrimDedup", s.t.Service, s.t.Provider, queue, qr.now, batch); err != nil {
			return err
		}
		if qr.settings.RequiresSession {
			if err := s.trimSessions(ctx, tx, &qr); err != nil {
				return err
			}
		}
		removable, err := s.e.int64s(ctx, tx, "SelectRemovableDeadLetters", s.t.Service, s.t.Provider, queue, qr.now, batch)
		if err != nil {
			return err
		}
		if len(removable) > 0 {
			slices.Sort(removable)
			if res.Removed, err = s.e.exec(ctx, tx, "DeleteDeadLetters", s.t.Service, s.t.Provider, queue, s.e.d.IntList(removable)); err != nil {
				return err
			}
		}
		if sweep {
			res.Bodies, err = s.e.sweepBodies(ctx, tx, s.t, batch)
		}
		return err
	})
	return res, err
}

func (s *tenantStore) Settle(ctx context.Context, p *store.SettleParams) ([]store.SettleResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", p.Action, err)
	}
	r := &writeReq{t: s.t, settle: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", p.Action, err)
	}
	return r.settled, nil
}

type heldRow struct {
	token int64
	count int
}

// settleGroup settles the requests of one queue. It locks every message
// they name in one statement, in sequence order, then applies each
// request against what it found: a receipt whose lease ended, whose token
// differs, or whose message an earlier request of the group settled gets
// ErrLockLost.
func (e *Engine) settleGroup(ctx context.Context, gt *groupTx, group []*writeReq) error {
	if e.has("CompleteMessages") && allComplete(group) {
		return e.completeGroup(ctx, gt.tx, group)
	}
	t, queue := group[0].t, group[0].settle.Queue
	tx := gt.tx
	qr, ok, err := e.groupQueue(ctx, gt, group, queue)
	if !ok {
		return err
	}
	var all []int64
	for _, r := range group {
		for _, rc := range r.settle.Receipts {
			all = append(all, rc.Seq)
		}
	}
	held, err := e.selectHeld(ctx, tx, t, &qr, all)
	if err != nil {
		return err
	}
	// Completions of the whole group go in one statement.
	var completed []int64
	for _, r := range group {
		if err := e.settleOne(ctx, tx, t, &qr, r, held, &completed); err != nil {
			return err
		}
	}
	if len(completed) == 0 {
		return nil
	}
	slices.Sort(completed)
	_, err = e.exec(ctx, tx, "DeleteMessages", t.Service, t.Provider, queue, e.d.IntList(completed))
	return err
}

// selectHeld locks, in sequence order, the rows of seqs whose lease has
// not ended by the database's clock, and returns their lock tokens and
// delivery counts by sequence number.
func (e *Engine) selectHeld(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, seqs []int64) (map[int64]heldRow, error) {
	sorted := slices.Compact(slices.Sorted(slices.Values(seqs)))
	held := make(map[int64]heldRow, len(sorted))
	rows, err := e.query(ctx, tx, "SelectHeld", t.Service, t.Provider, qr.settings.Name, qr.now, e.d.IntList(sorted))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			seq int64
			h   heldRow
		)
		if err := rows.Scan(&seq, &h.token, &h.count); err != nil {
			return nil, fmt.Errorf("SelectHeld: %w", err)
		}
		held[seq] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("SelectHeld: %w", err)
	}
	return held, nil
}

func allComplete(group []*writeReq) bool {
	for _, r := range group {
		if r.settle.Action != store.Complete {
			return false
		}
	}
	return true
}

// completeGroup settles a group of completions with one statement, where
// the dialect has CompleteMessages (in the group's transaction, or alone
// when q is the write pool): it deletes, in sequence order, the messages
// whose current lease the receipts name, and returns them. A receipt that
// names a message a receipt before it completed gets ErrLockLost, as in
// settleGroup.
func (e *Engine) completeGroup(ctx context.Context, q querier, group []*writeReq) error {
	t, queue := group[0].t, group[0].settle.Queue
	seen := make(map[sluicetype.Receipt]bool)
	var rows []receiptRow
	for _, r := range group {
		for _, rc := range r.settle.Receipts {
			if !seen[rc] {
				seen[rc] = true
				rows = append(rows, receiptRow{Seq: rc.Seq, Token: rc.Token})
			}
		}
	}
	slices.SortFunc(rows, func(a, b receiptRow) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Token, b.Token))
	})
	js, err := jsonText(rows)
	if err != nil {
		return err
	}
	rs, err := e.query(ctx, q, "CompleteMessages", t.Service, t.Provider, queue, js)
	if err != nil {
		return err
	}
	defer rs.Close()
	found := false
	done := make(map[sluicetype.Receipt]bool, len(rows))
	for rs.Next() {
		found = true
		var seq, token sql.NullInt64
		if err := rs.Scan(&seq, &token); err != nil {
			return fmt.Errorf("CompleteMessages: %w", err)
		}
		if seq.Valid {
			done[sluicetype.Receipt{Seq: seq.Int64, Token: token.Int64}] = true
		}
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("CompleteMessages: %w", err)
	}
	if !found {
		for _, r := range group {
			r.err = fmt.Errorf("queue %q: %w", queue, sluicetype.ErrQueueNotFound)
		}
		return nil
	}
	for _, r := range group {
		r.settled = make([]store.SettleResult, len(r.settle.Receipts))
		for i, rc := range r.settle.Receipts {
			if !done[rc] {
				r.settled[i].Err = fmt.Errorf("message %d: %w", rc.Seq, sluicetype.ErrLockLost)
				continue
			}
			delete(done, rc)
		}
	}
	return nil
}

// settleOne applies one request; completions are added to completed for
// the caller to delete in one go.
func (e *Engine) settleOne(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, r *writeReq, held map[int64]heldRow, completed *[]int64) error {
	p := r.settle
	r.settled = make([]store.SettleResult, len(p.Receipts))
	var mine, exhausted []int64
	for i, rc := range p.Receipts {
		h, ok := held[rc.Seq]
		if !ok || h.token != rc.Token {
			r.settled[i].Err = fmt.Errorf("message %d: %w", rc.Seq, sluicetype.ErrLockLost)
			continue
		}
		if p.Action != store.Extend {
			delete(held, rc.Seq)
		}
		if p.Action == store.Abandon && h.count >= qr.settings.MaxDeliveryCount {
			exhausted = append(exhausted, rc.Seq)
			continue
		}
		mine = append(mine, rc.Seq)
	}
	slices.Sort(mine)
	mine = slices.Compact(mine)
	if p.Properties != nil {
		if err := e.setProperties(ctx, tx, t, qr, p.Properties, append(slices.Clone(mine), exhausted...)); err != nil {
			return err
		}
	}
	switch p.Action {
	case store.Complete:
		*completed = append(*completed, mine...)
	case store.DeadLetter:
		return e.deadLetter(ctx, tx, t, qr, mine, p.Reason, p.Description)
	case store.Abandon:
		desc := fmt.Sprintf("abandoned on the last of %d allowed deliveries", qr.settings.MaxDeliveryCount)
		if err := e.deadLetter(ctx, tx, t, qr, exhausted, sluicetype.ReasonMaxDeliveryCountExceeded, desc); err != nil {
			return err
		}
		if len(mine) == 0 {
			return nil
		}
		list := e.d.IntList(mine)
		if p.Delay > 0 {
			_, err := e.exec(ctx, tx, "MakeScheduled", qr.now+ms(p.Delay), t.Service, t.Provider, qr.settings.Name, list)
			return err
		}
		if _, err := e.exec(ctx, tx, "MakeReady", t.Service, t.Provider, qr.settings.Name, list); err != nil {
			return err
		}
		key := QueueKey(t, qr.settings.Name)
		r.signals = append(r.signals, key)
		return e.notify(ctx, tx, key)
	case store.Defer:
		if len(mine) == 0 {
			return nil
		}
		_, err := e.exec(ctx, tx, "MakeDeferred", t.Service, t.Provider, qr.settings.Name, e.d.IntList(mine))
		return err
	case store.Release:
		if len(mine) == 0 {
			return nil
		}
		if _, err := e.exec(ctx, tx, "ReleaseMessages", t.Service, t.Provider, qr.settings.Name, e.d.IntList(mine)); err != nil {
			return err
		}
		key := QueueKey(t, qr.settings.Name)
		r.signals = append(r.signals, key)
		return e.notify(ctx, tx, key)
	case store.Extend:
		if len(mine) == 0 {
			return nil
		}
		until := qr.now + ms(p.Extension)
		if _, err := e.exec(ctx, tx, "ExtendLeases", until, t.Service, t.Provider, qr.settings.Name, e.d.IntList(mine)); err != nil {
			return err
		}
		for i := range r.settled {
			if r.settled[i].Err == nil {
				r.settled[i].LockedUntil = fromMS(until)
			}
		}
	}
	return nil
}

// setProperties replaces the application properties of messages.
func (e *Engine) setProperties(ctx context.Context, tx querier, t store.Tenant, qr *queueRow, props map[string]string, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	slices.Sort(seqs)
	enc, err := encodeProps(props)
	if err != nil {
		return err
	}
	_, err = e.exec(ctx, tx, "SetProperties", nullable(enc), t.Service, t.Provider, qr.settings.Name, e.d.IntList(seqs))
	return err
}

func (s *tenantStore) LeaseDeferred(ctx context.Context, p *store.LeaseDeferredParams) ([]sluicetype.Leased, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: lease deferred: %w", err)
	}
	sorted := slices.Clone(p.Seqs)
	slices.Sort(sorted)
	var out []sluicetype.Leased
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		var session *store.SessionParams
		until := qr.now + ms(p.Visibility)
		switch {
		case qr.settings.RequiresSession && p.Session == nil:
			return fmt.Errorf("queue %q requires sessions: receive deferred messages under a session: %w", p.Queue, sluicetype.ErrSessionRequired)
		case qr.settings.RequiresSession:
			session = p.Session
			if until, err = s.heldSession(ctx, tx, &qr, session); err != nil {
				return err
			}
		case p.Session != nil:
			return fmt.Errorf("queue %q does not require sessions: %w", p.Queue, sluicetype.ErrInvalidArgument)
		}
		// A deferred message whose lease ended is deferred again once the
		// ended leases are resolved.
		if qr.nextDue.Valid && qr.nextDue.Int64 <= qr.now {
			if _, err := s.e.resolveDue(ctx, tx, s.t, &qr, dueBatch); err != nil {
				return err
			}
		}
		rows, err := s.e.query(ctx, tx, "SelectDeferred", s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(sorted))
		if err != nil {
			return err
		}
		found := make(map[int64]sluicetype.Message, len(sorted))
		for rows.Next() {
			m, err := scanMessage(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("SelectDeferred: %w", err)
			}
			found[m.Seq] = m
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("SelectDeferred: %w", err)
		}
		msgs := make([]sluicetype.Message, len(p.Seqs))
		for i, seq := range p.Seqs {
			m, ok := found[seq]
			if !ok || session != nil && m.SessionID != session.SessionID {
				return fmt.Errorf("deferred message %d of queue %q: %w", seq, p.Queue, sluicetype.ErrMessageNotFound)
			}
			msgs[i] = m
		}
		token := newToken()
		if session != nil {
			token = session.Token
		}
		var leased []leaseRow
		out, leased = leaseUnder(msgs, token, until)
		slices.SortFunc(leased, func(a, b leaseRow) int { return cmp.Compare(a.Seq, b.Seq) })
		if err := s.e.leaseRows(ctx, tx, s.t, p.Queue, leased); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: lease deferred: %w", err)
	}
	return out, nil
}

func (s *tenantStore) CancelScheduled(ctx context.Context, p *store.CancelParams) error {
	if err := p.Validate(s.e.limits); err != nil {
		return fmt.Errorf("sluice: cancel scheduled: %w", err)
	}
	sorted := slices.Clone(p.Seqs)
	slices.Sort(sorted)
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		found, err := s.e.int64s(ctx, tx, "SelectScheduled", s.t.Service, s.t.Provider, p.Queue, qr.now, s.e.d.IntList(sorted))
		if err != nil {
			return err
		}
		// The other numbers may name routed sends: messages sent to this
		// topic or forwarding queue, stored as copies elsewhere.
		var routed []int64
		for _, seq := range sorted {
			if _, ok := slices.BinarySearch(found, seq); !ok {
				routed = append(routed, seq)
			}
		}
		if len(found) > 0 {
			if _, err := s.e.exec(ctx, tx, "DeleteMessages", s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(found)); err != nil {
				return err
			}
		}
		if len(routed) == 0 {
			return nil
		}
		return s.e.cancelRouted(ctx, tx, s.t, p.Queue, qr.now, routed)
	})
	if err != nil {
		return fmt.Errorf("sluice: cancel scheduled: %w", err)
	}
	return nil
}

func (s *tenantStore) Peek(ctx context.Context, p *store.PeekParams) ([]sluicetype.Message, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: peek: %w", err)
	}
	qr, err := s.e.getQueue(ctx, s.e.r, s.t, p.Queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: peek: %w", err)
	}
	rows, err := s.e.query(ctx, s.e.r, "PeekMessages", s.t.Service, s.t.Provider, p.Queue, p.FromSeq, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: peek: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.Message
	for rows.Next() {
		var row nullMessage
		var deferred int
		if err := rows.Scan(append(row.scanDest(), &deferred)...); err != nil {
			return nil, fmt.Errorf("sluice: peek: %w", err)
		}
		m, err := row.message()
		if err != nil {
			return nil, fmt.Errorf("sluice: peek: %w", err)
		}
		m.State = peekedState(m, deferred != 0, qr.now)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: peek: %w", err)
	}
	return out, nil
}

// peekedState is where a message stands now, by the database's clock,
// as stats count it: a row whose lease or schedule ended is active (or
// deferred again, for a deferred one), and an active one whose
// time-to-live ran out is expired (a deferred one never expires).
func peekedState(m sluicetype.Message, deferred bool, now int64) sluicetype.MessageState {
	st := m.State
	ended := (st == sluicetype.StateLeased || st == sluicetype.StateScheduled) && m.VisibleAt.UnixMilli() <= now
	switch {
	case ended && deferred:
		return sluicetype.StateDeferred
	case ended:
		st = sluicetype.StateReady
	}
	if st == sluicetype.StateReady && !m.ExpiresAt.IsZero() && m.ExpiresAt.UnixMilli() <= now {
		return sluicetype.StateExpired
	}
	return st
}

// mustExist fails with ErrQueueNotFound when the queue does not exist.
func (s *tenantStore) mustExist(ctx context.Context, queue string) error {
	_, err := s.e.getQueue(ctx, s.e.r, s.t, queue)
	return err
}

func (s *tenantStore) PeekDeadLetters(ctx context.Context, p *store.PeekParams) ([]sluicetype.DeadLetter, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	if err := s.mustExist(ctx, p.Queue); err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	rows, err := s.e.query(ctx, s.e.r, "PeekDeadLetters", s.t.Service, s.t.Provider, p.Queue, p.FromSeq, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.DeadLetter
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	return out, nil
}

func (s *tenantStore) ResubmitDeadLetters(ctx context.Context, p *store.ResubmitParams) ([]int64, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: resubmit: %w", err)
	}
	sorted := slices.Clone(p.Seqs)
	slices.Sort(sorted)
	var out []int64
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		gt := newGroupTx(tx)
		if _, err := gt.queue(ctx, s.e, s.t, p.Queue); err != nil {
			return err
		}
		found, err := s.e.int64s(ctx, tx, "LockDeadLetters", s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(sorted))
		if err != nil {
			return err
		}
		if len(found) != len(sorted) {
			for _, seq := range sorted {
				if _, ok := slices.BinarySearch(found, seq); !ok {
					return fmt.Errorf("dead letter %d of queue %q: %w", seq, p.Queue, sluicetype.ErrMessageNotFound)
				}
			}
		}
		qr, err := s.e.reserveSeqs(ctx, gt, s.t, p.Queue, len(sorted))
		if err != nil {
			return err
		}
		first := qr.lastSeq - int64(len(p.Seqs)) + 1
		mapping := make([]seqMapping, len(p.Seqs))
		out = make([]int64, len(p.Seqs))
		for i, old := range p.Seqs {
			out[i] = first + int64(i)
			mapping[i] = seqMapping{Old: old, New: out[i]}
		}
		js, err := jsonText(mapping)
		if err != nil {
			return err
		}
		var expires sql.NullInt64
		if qr.settings.DefaultTTL > 0 {
			expires = sql.NullInt64{Int64: qr.now + ms(qr.settings.DefaultTTL), Valid: true}
		}
		if _, err := s.e.exec(ctx, tx, "ResubmitDeadLetters", qr.now, expires, js, s.t.Service, s.t.Provider, p.Queue); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, "DeleteDeadLetters", s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(sorted)); err != nil {
			return err
		}
		if qr.settings.RequiresSession {
			if _, err := s.e.exec(ctx, tx, "ActivateSessions", s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(out)); err != nil {
				return err
			}
		}
		if s.e.d.NotifyOnReserve {
			return nil
		}
		return s.e.notify(ctx, tx, QueueKey(s.t, p.Queue))
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: resubmit: %w", err)
	}
	s.e.hub.Signal(QueueKey(s.t, p.Queue))
	return out, nil
}

// purgeBatch bounds the dead letters one purge transaction deletes.
const purgeBatch = 1000

func (s *tenantStore) PurgeDeadLetters(ctx context.Context, queue string) (int64, error) {
	if err := store.ValidateName("queue", queue); err != nil {
		return 0, fmt.Errorf("sluice: purge: %w", err)
	}
	if err := s.mustExist(ctx, queue); err != nil {
		return 0, fmt.Errorf("sluice: purge: %w", err)
	}
	var total int64
	for {
		var n int64
		err := s.e.inTx(ctx, func(tx *sql.Tx) error {
			seqs, err := s.e.int64s(ctx, tx, "SelectDeadLetterSeqs", s.t.Service, s.t.Provider, queue, purgeBatch)
			if err != nil || len(seqs) == 0 {
				n = 0
				return err
			}
			n, err = s.e.exec(ctx, tx, "DeleteDeadLetters", s.t.Service, s.t.Provider, queue, s.e.d.IntList(seqs))
			return err
		})
		if err != nil {
			return total, fmt.Errorf("sluice: purge: %w", err)
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

func (s *tenantStore) DeleteDeadLetters(ctx context.Context, queue string, seqs []int64) (int64, error) {
	if err := store.ValidateName("queue", queue); err != nil {
		return 0, fmt.Errorf("sluice: delete dead letters: %w", err)
	}
	if len(seqs) == 0 || len(seqs) > s.e.limits.MaxBatch {
		return 0, fmt.Errorf("sluice: delete dead letters: %d sequence numbers, want 1 to %d: %w", len(seqs), s.e.limits.MaxBatch,
			sluicetype.ErrInvalidArgument)
	}
	for _, n := range seqs {
		if n < 1 {
			return 0, fmt.Errorf("sluice: delete dead letters: sequence number %d: numbers start at 1: %w", n, sluicetype.ErrInvalidArgument)
		}
	}
	if err := s.mustExist(ctx, queue); err != nil {
		return 0, fmt.Errorf("sluice: delete dead letters: %w", err)
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(seqs)))
	var n int64
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = s.e.exec(ctx, tx, "DeleteDeadLetters", s.t.Service, s.t.Provider, queue, s.e.d.IntList(sorted))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sluice: delete dead letters: %w", err)
	}
	return n, nil
}

func (s *tenantStore) DeadLetterReasons(ctx context.Context, queue string) (map[string]int64, error) {
	if err := store.ValidateName("queue", queue); err != nil {
		return nil, fmt.Errorf("sluice: dead letter reasons: %w", err)
	}
	if _, err := s.e.getQueue(ctx, s.e.r, s.t, queue); err != nil {
		return nil, fmt.Errorf("sluice: dead letter reasons: %w", err)
	}
	rows, err := s.e.query(ctx, s.e.r, "CountDeadLettersByReason", s.t.Service, s.t.Provider, queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: dead letter reasons: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var reason string
		var n int64
		if err := rows.Scan(&reason, &n); err != nil {
			return nil, fmt.Errorf("sluice: dead letter reasons: %w", err)
		}
		out[reason] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: dead letter reasons: %w", err)
	}
	return out, nil
}

func (s *tenantStore) QueueStats(ctx context.Context, queue string) (store.QueueStats, error) {
	var st store.QueueStats
	if err := store.ValidateName("queue", queue); err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	qr, err := s.e.getQueue(ctx, s.e.r, s.t, queue)
	if err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	var oldest, oldestDeferred sql.NullInt64
	err = s.e.queryRow(ctx, s.e.r, "QueueStats", []any{qr.now, qr.now, qr.now, qr.now, s.t.Service, s.t.Provider, queue},
		&st.Active, &st.Expired, &st.Scheduled, &st.InFlight, &st.Deferred, &oldest, &oldestDeferred)
	if err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	if err := s.e.queryRow(ctx, s.e.r, "CountDeadLetters", []any{s.t.Service, s.t.Provider, queue}, &st.DeadLettered); err != nil {
		return st, fmt.Errorf("sluice: stats: %w", err)
	}
	age := func(at sql.NullInt64) time.Duration {
		if !at.Valid || at.Int64 >= qr.now {
			return 0
		}
		return time.Duration(qr.now-at.Int64) * time.Millisecond
	}
	st.OldestAge, st.OldestDeferredAge = age(oldest), age(oldestDeferred)
	return st, nil
}

func (s *tenantStore) WatchQueue(queue string) (<-chan struct{}, func()) {
	return s.e.hub.Watch(QueueKey(s.t, queue))
}
