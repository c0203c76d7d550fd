package engine

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// browseChunk bounds the rows one statement of a browse examines.
const browseChunk = 1000

// Browse examines rows without their bodies (ScanMessages or
// ScanDeadLetters), chunk by chunk, and reads the bodies of those that
// match only (PeekMessagesBySeqs or PeekDeadLettersBySeqs): a search
// through a queue of large messages costs the database its rows'
// metadata, not their bodies. The two reads are not one snapshot: a
// message that matched and is gone (or has changed so that it no longer
// matches) by the second is left out.
func (s *tenantStore) Browse(ctx context.Context, p *store.BrowseParams) (store.BrowseResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return store.BrowseResult{}, fmt.Errorf("sluice: browse: %w", err)
	}
	qr, err := s.e.getQueue(ctx, s.e.r, s.t, p.Queue)
	if err != nil {
		return store.BrowseResult{}, fmt.Errorf("sluice: browse: %w", err)
	}
	scan, fetch := qScanMessages, qPeekMessagesBySeqs
	if p.DeadLetters {
		scan, fetch = qScanDeadLetters, qPeekDeadLettersBySeqs
	}
	match := p.Match
	if match == nil {
		match = func(*sluicetype.DeadLetter) bool { return true }
	}
	var (
		seqs    []int64
		from    = p.FromSeq
		scanned = 0
		res     store.BrowseResult
	)
	for len(seqs) < p.Max && scanned < p.Scan {
		limit := min(browseChunk, p.Scan-scanned)
		rows, err := s.browseRows(ctx, scan, p.DeadLetters, qr.now, s.t.Service, s.t.Provider, p.Queue, from, limit)
		if err != nil {
			return store.BrowseResult{}, fmt.Errorf("sluice: browse: %w", err)
		}
		for i := range rows {
			scanned++
			from = rows[i].Seq + 1
			if match(&rows[i]) {
				seqs = append(seqs, rows[i].Seq)
				if len(seqs) == p.Max {
					break
				}
			}
		}
		if len(rows) < limit && (len(rows) == 0 || from == rows[len(rows)-1].Seq+1) {
			from = 0 // the end, examined: nothing after these
			break
		}
	}
	res.Next = from
	if len(seqs) == 0 {
		return res, nil
	}
	full, err := s.browseRows(ctx, fetch, p.DeadLetters, qr.now, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(seqs))
	if err != nil {
		return store.BrowseResult{}, fmt.Errorf("sluice: browse: %w", err)
	}
	for i := range full {
		if match(&full[i]) {
			res.Messages = append(res.Messages, full[i])
		}
	}
	return res, nil
}

// browseRows runs one of a browse's reads, name, of dead letters or of
// messages (with their state as Peek reports it at now), and reads its
// rows.
func (s *tenantStore) browseRows(ctx context.Context, name string, dead bool, now int64, args ...any) ([]sluicetype.DeadLetter, error) {
	rows, err := s.e.query(ctx, s.e.r, name, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sluicetype.DeadLetter
	for rows.Next() {
		var d sluicetype.DeadLetter
		if dead {
			if d, err = scanDeadLetter(&rows); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		} else {
			var row nullMessage
			var deferred int
			if err := rows.Scan(append(row.scanDest(), &deferred)...); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if d.Message, err = row.message(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			d.State = peekedState(d.Message, deferred != 0, now)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// DeleteMessages deletes in one transaction, with the database's clock:
// the oldest unlocked messages are chosen first (SelectUnlocked), then
// the rows named are deleted unless a lock holds them (DeleteUnlocked),
// which also settles a race with a lease: a row a lease took meanwhile
// stays. What the deleted messages leave behind goes as a completion's
// does: a shared body with the next sweep, a session's flag with the
// next accept.
func (s *tenantStore) DeleteMessages(ctx context.Context, p *store.DeleteParams) (int64, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return 0, fmt.Errorf("sluice: delete messages: %w", err)
	}
	var n int64
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		seqs := slices.Sorted(slices.Values(p.Seqs))
		if p.Seqs == nil {
			before := int64(maxTimeMS + 1)
			if !p.Before.IsZero() {
				before = timeMS(p.Before)
			}
			if seqs, err = s.e.int64s(ctx, tx, qSelectUnlocked, s.t.Service, s.t.Provider, p.Queue, qr.now, before, p.Max); err != nil {
				return err
			}
		}
		if len(seqs) == 0 {
			n = 0
			return nil
		}
		n, err = s.e.exec(ctx, tx, qDeleteUnlocked, s.t.Service, s.t.Provider, p.Queue, qr.now, s.e.d.IntList(seqs))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sluice: delete messages: %w", err)
	}
	return n, nil
}
