package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

func (s *tenantStore) Append(ctx context.Context, p *store.AppendParams) (store.AppendResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return store.AppendResult{}, fmt.Errorf("sluice: append: %w", err)
	}
	r := &writeReq{t: s.t, app: p}
	if err := s.e.commit.submit(ctx, r); err != nil {
		return store.AppendResult{}, fmt.Errorf("sluice: append: %w", err)
	}
	return r.appRes, nil
}

// appendTenant writes the appends of one tenant in partition order: in
// one statement where the dialect has it and they fit, otherwise a
// partition at a time.
func (e *Engine) appendTenant(ctx context.Context, tx querier, group []*writeReq) error {
	if e.appendInOne(group) {
		return e.appendRecords(ctx, tx, group)
	}
	for _, g := range groupBy(group, func(r *writeReq) int32 { return r.app.Partition }) {
		if err := e.appendGroup(ctx, tx, g); err != nil {
			return err
		}
	}
	return nil
}

// appendGroup writes the appends of one partition: it takes positions for
// all of them with one update of the partition's head row (held until
// commit, so positions are gap-free and become visible in order), then
// inserts the records in bulk.
func (e *Engine) appendGroup(ctx context.Context, tx querier, group []*writeReq) error {
	t, part := group[0].t, group[0].app.Partition
	n := countRecords(group)
	head, now, notified, err := e.bumpHead(ctx, tx, t, part, n)
	if err != nil {
		return err
	}
	numberAppends(group, head, now)
	rows := make([]recordRow, 0, n)
	for _, r := range group {
		for i := range r.app.Records {
			row, err := newRecordRow(&r.app.Records[i])
			if err != nil {
				return err
			}
			row.Position = r.appRes.First + int64(i)
			rows = append(rows, row)
		}
	}
	if err := e.insertRecords(ctx, tx, t, part, now, rows); err != nil {
		return err
	}
	if notified {
		return nil
	}
	return e.notify(ctx, tx, PartitionKey(t, part))
}

func countRecords(group []*writeReq) int {
	n := 0
	for _, r := range group {
		n += len(r.app.Records)
	}
	return n
}

// numberAppends gives the appends of one partition, in arrival order, the
// positions up to head, appended at now.
func numberAppends(group []*writeReq, head, now int64) {
	pos := head - int64(countRecords(group))
	for _, r := range group {
		r.appRes.First = pos + 1
		pos += int64(len(r.app.Records))
		r.appRes.Last = pos
		r.appendedAt = now
	}
}

// appended returns the records an append committed, as Read returns them.
func (r *writeReq) appended() []sluicetype.Record {
	recs := make([]sluicetype.Record, len(r.app.Records))
	at := fromMS(r.appendedAt)
	for i := range r.app.Records {
		nr := &r.app.Records[i]
		recs[i] = sluicetype.Record{
			Position: r.appRes.First + int64(i), Namespace: nr.Namespace, Key: nr.Key,
			Payload: append([]byte{}, nr.Payload...), AppendedAt: at,
		}
		if len(nr.Properties) > 0 {
			recs[i].Properties = maps.Clone(nr.Properties)
		}
	}
	return recs
}

func newRecordRow(rec *store.NewRecord) (recordRow, error) {
	props, err := encodeProps(rec.Properties)
	return recordRow{Namespace: rec.Namespace, Key: rec.Key, Properties: props, Payload: rec.Payload}, err
}

// appendInOne reports whether AppendRecords can write a group of appends
// of one tenant: the dialect has it and the rows fit one chunk.
func (e *Engine) appendInOne(group []*writeReq) bool {
	if !e.d.Capabilities.AppendStatement {
		return false
	}
	n, bytes := 0, 0
	for _, r := range group {
		n += len(r.app.Records)
		for i := range r.app.Records {
			rec := &r.app.Records[i]
			bytes += 2*len(rec.Payload) + len(rec.Namespace) + len(rec.Key)
			for k, v := range rec.Properties {
				bytes += len(k) + len(v) + 8
			}
		}
	}
	return n <= maxChunkRows && bytes+64*n <= maxChunkBytes
}

// appendRecords writes a group of appends of one tenant, to any of its
// partitions, with one statement (AppendRecords); outside a transaction
// that is one round trip for the whole group.
//
// Its arguments are arrays, a column each: of the partitions' head rows,
// then of the records. The dialect's driver binds Go slices as arrays
// (pgx does, in its binary format), so a payload goes as its bytes, not
// in hex within JSON text, which took about 13 KiB of garbage to append
// a 1 KiB record, and the server's work to parse it back.
func (e *Engine) appendRecords(ctx context.Context, q querier, batch []*writeReq) error {
	s, err := e.appendStmt(q, batch)
	if err != nil {
		return err
	}
	return e.runStmt(ctx, q, s)
}

// appendStmt is AppendRecords for a group of appends of one tenant
// (AppendRecord, its scalar form, for a group of one record).
func (e *Engine) appendStmt(q querier, batch []*writeReq) (*pipedStmt, error) {
	t := batch[0].t
	groups := groupBy(batch, func(r *writeReq) int32 { return r.app.Partition })
	total := 0
	for _, r := range batch {
		total += len(r.app.Records)
	}
	var (
		// Each partition's number, records taken and notification key.
		headParts = make([]int32, 0, len(groups))
		headNs    = make([]int64, 0, len(groups))
		headKeys  = make([]string, 0, len(groups))
		// Each record's partition, position below the partition's new
		// head, and columns.
		parts      = make([]int32, 0, total)
		below      = make([]int64, 0, total)
		namespaces = make([]string, 0, total)
		keys       = make([]string, 0, total)
		props      = make([]*string, 0, total)
		payloads   = make([][]byte, 0, total)
	)
	for _, g := range groups {
		part, n := g[0].app.Partition, countRecords(g)
		headParts, headNs = append(headParts, part), append(headNs, int64(n))
		headKeys = append(headKeys, e.payload(q, PartitionKey(t, part)))
		off := int64(n)
		for _, r := range g {
			for i := range r.app.Records {
				rec := &r.app.Records[i]
				p, err := encodeProps(rec.Properties)
				if err != nil {
					return nil, err
				}
				payload := payloadBytes(rec.Payload)
				off--
				parts, below = append(parts, part), append(below, off)
				namespaces, keys = append(namespaces, rec.Namespace), append(keys, rec.Key)
				props, payloads = append(props, p), append(payloads, payload)
			}
		}
	}
	s := &pipedStmt{name: qAppendRecords, reqs: batch, args: []any{t.Service, t.Provider, headParts, headNs, headKeys,
		parts, below, namespaces, keys, props, payloads}}
	if total == 1 {
		// One record: its columns as scalars (AppendRecord).
		s.name, s.args = qAppendRecord, []any{t.Service, t.Provider, parts[0], headKeys[0], namespaces[0], keys[0], props[0], payloads[0]}
	}
	s.read = func(rs rows) error {
		type headAt struct{ head, now int64 }
		got := make(map[int32]headAt, len(groups))
		for rs.Next() {
			var (
				part int32
				h    headAt
			)
			if err := rs.Scan(&part, &h.head, &h.now); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			got[part] = h
		}
		if err := rs.Err(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		for _, g := range groups {
			h, ok := got[g[0].app.Partition]
			if !ok {
				return fmt.Errorf("AppendRecords: no head for partition %d", g[0].app.Partition)
			}
			numberAppends(g, h.head, h.now)
		}
		return nil
	}
	return s, nil
}

// bumpHead takes n positions of a partition, creating its head row on
// first use, and returns the new head and the database's time; notified
// says listeners were notified on the way (BumpHeadReturning).
func (e *Engine) bumpHead(ctx context.Context, tx querier, t store.Tenant, part int32, n int) (head, now int64, notified bool, err error) {
	for attempt := 0; ; attempt++ {
		if e.d.Capabilities.BumpHeadReturning {
			args := []any{n, t.Service, t.Provider, part, e.payload(tx, PartitionKey(t, part))}
			err = e.queryRow(ctx, tx, qBumpHeadReturning, args, &head, &now)
			if err == nil {
				return head, now, true, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return 0, 0, false, fmt.Errorf("BumpHeadReturning: %w", err)
			}
		} else {
			affected, err := e.exec(ctx, tx, qBumpHead, n, t.Service, t.Provider, part)
			if err != nil {
				return 0, 0, false, err
			}
			if affected > 0 {
				var trimmed int64
				if err := e.queryRow(ctx, tx, qGetPartition, []any{t.Service, t.Provider, part}, &head, &trimmed, &now); err != nil {
					return 0, 0, false, fmt.Errorf("GetPartition: %w", err)
				}
				return head, now, false, nil
			}
		}
		if attempt > 0 {
			return 0, 0, false, fmt.Errorf("partition %d has no head row after creating it", part)
		}
		if _, err := e.exec(ctx, tx, qEnsurePartition, t.Service, t.Provider, part); err != nil {
			return 0, 0, false, err
		}
	}
}

// insertRecords inserts positioned records: as JSON chunks, or one
// statement a row where the dialect has InsertRecord (SQLite).
func (e *Engine) insertRecords(ctx context.Context, tx querier, t store.Tenant, part int32, now int64, rows []recordRow) error {
	if e.d.Capabilities.RowInserts {
		for _, r := range rows {
			payload := payloadBytes(r.Payload)
			if _, err := e.exec(ctx, tx, qInsertRecord, t.Service, t.Provider, part, now,
				r.Position, r.Namespace, r.Key, nullable(r.Properties), payload); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range chunks(len(rows), func(i int) int { return 2*len(rows[i].Payload) + len(rows[i].Key) + 64 }) {
		js, err := jsonText(rows[c[0]:c[1]])
		if err != nil {
			return err
		}
		if _, err := e.exec(ctx, tx, qInsertRecords, t.Service, t.Provider, part, now, js); err != nil {
			return err
		}
	}
	return nil
}

func (s *tenantStore) Read(ctx context.Context, p *store.ReadParams) ([]sluicetype.Record, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: read: %w", err)
	}
	if p.Namespace != "" {
		return s.readStream(ctx, p)
	}
	max := p.Max
	if p.Through > 0 {
		max = int(min(int64(max), p.Through-p.After)) // positions are gap-free
	}
	out, err := s.readRecords(ctx, qReadRecords, s.t.Service, s.t.Provider, p.Partition, p.After, max)
	if err != nil {
		return nil, err
	}
	// Positions are gap-free, so a read that does not start right after
	// p.After either reached the head or lost records to retention.
	if len(out) == 0 || out[0].Position != p.After+1 {
		if err := s.checkTrimmed(ctx, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readStream reads one stream's records, through the index on (partition,
// namespace, stream_key, position), so that the partition's other streams
// cost nothing however many records they hold.
//
// The stream's positions have gaps (the other streams' records), so unlike
// the partition read it cannot tell a trimmed record by a gap: it fails
// whenever p.After is below the partition's trimmed position, read after
// the records. That order makes the check sound. Every trim deletes
// records and raises the trimmed position past them in one transaction;
// the position never moves back; and each of the two statements (neither
// in a transaction) sees what had committed when it began, the second no
// less than the first. So if a trim deleted a record of the stream after
// p.After before the read could return it, that trim had committed before
// the read began, and the trimmed position read next is at least that
// record's, above p.After. Checked before the read, the check could pass
// and a trim committing in between delete records the read would then
// silently skip (Concurrency/ReadStreamWhileTrimming of the conformance
// suite catches that order). A trim that commits after the read may fail
// a read that lost nothing: the reader is told one read early.
func (s *tenantStore) readStream(ctx context.Context, p *store.ReadParams) ([]sluicetype.Record, error) {
	through := int64(math.MaxInt64)
	if p.Through > 0 {
		through = p.Through
	}
	out, err := s.readRecords(ctx, qReadStreamRecords, s.t.Service, s.t.Provider, p.Partition, p.Namespace, p.Key, p.After, through, p.Max)
	if err != nil {
		return nil, err
	}
	if err := s.checkTrimmed(ctx, p); err != nil {
		return nil, err
	}
	return out, nil
}

// readRecords runs a query of records and scans them.
func (s *tenantStore) readRecords(ctx context.Context, name string, args ...any) ([]sluicetype.Record, error) {
	rows, err := s.e.query(ctx, s.e.r, name, args...)
	if err != nil {
		return nil, fmt.Errorf("sluice: read: %w", err)
	}
	defer rows.Close()
	// Scanned into a pooled slice, then copied out at its size: a replay
	// reads thousands of records a second, and a slice grown as it goes
	// leaves its smaller copies behind as garbage, and one sized for the
	// read's max a large one when a read at the head finds a record or two.
	scratch := recordScratch.Get().(*[]sluicetype.Record)
	out := (*scratch)[:0]
	defer func() {
		*scratch = out
		putRecordScratch(scratch)
	}()
	for rows.Next() {
		r, err := scanRecord(&rows)
		if err != nil {
			return nil, fmt.Errorf("sluice: read: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluice: read: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return slices.Clone(out), nil
}

// recordScratch holds the slices reads scan records into.
var recordScratch = sync.Pool{New: func() any { s := make([]sluicetype.Record, 0, 64); return &s }}

// putRecordScratch empties a scan slice, so that the pool holds no
// payloads, and pools it unless a large read left it large.
func putRecordScratch(s *[]sluicetype.Record) {
	if cap(*s) > 1024 {
		return
	}
	clear(*s) // what a read scanned: the rest was cleared before
	*s = (*s)[:0]
	recordScratch.Put(s)
}

// checkTrimmed returns ErrTrimmed if retention trimmed the partition
// past p.After. It must run after the read it checks (see readStream).
func (s *tenantStore) checkTrimmed(ctx context.Context, p *store.ReadParams) error {
	info, err := s.PartitionInfo(ctx, p.Partition)
	if err != nil {
		return err
	}
	if p.After < info.Trimmed {
		return fmt.Errorf("sluice: read partition %d after %d: retention trimmed through %d: %w",
			p.Partition, p.After, info.Trimmed, sluicetype.ErrTrimmed)
	}
	return nil
}

func (s *tenantStore) PartitionInfo(ctx context.Context, partition int32) (store.PartitionInfo, error) {
	var info store.PartitionInfo
	if err := store.ValidatePartition(partition); err != nil {
		return info, fmt.Errorf("sluice: partition info: %w", err)
	}
	var now int64
	err := s.e.queryRow(ctx, s.e.r, qGetPartition, []any{s.t.Service, s.t.Provider, partition}, &info.Head, &info.Trimmed, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return store.PartitionInfo{}, nil
	}
	if err != nil {
		return info, fmt.Errorf("sluice: partition info: %w", err)
	}
	return info, nil
}

func (s *tenantStore) WatchPartition(partition int32) (<-chan struct{}, func()) {
	return s.e.hub.Watch(PartitionKey(s.t, partition))
}

func (s *tenantStore) TailPartition(partition int32) store.Tail {
	return s.e.hub.Tail(PartitionKey(s.t, partition))
}

var _ store.TxAppender = (*tenantStore)(nil)

// AppendTx appends records in the caller's transaction. The partition's
// head row stays locked until the caller's transaction ends.
func (s *tenantStore) AppendTx(ctx context.Context, tx store.Tx, p *store.AppendParams) (store.AppendResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return store.AppendResult{}, fmt.Errorf("sluice: append: %w", err)
	}
	q, err := s.e.foreign(tx)
	if err != nil {
		return store.AppendResult{}, fmt.Errorf("sluice: append: %w", err)
	}
	if p.Partitions > 0 {
		if err := s.e.checkPartitionsTx(ctx, q, s.t, p.Partitions); err != nil {
			return store.AppendResult{}, fmt.Errorf("sluice: append: %w", s.e.wrap(err))
		}
	}
	r := &writeReq{t: s.t, app: p}
	if err := s.e.appendTenant(ctx, q, []*writeReq{r}); err != nil {
		return store.AppendResult{}, fmt.Errorf("sluice: append: %w", s.e.wrap(err))
	}
	return r.appRes, nil
}
