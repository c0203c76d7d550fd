package engine

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// The dead-letter queue is received from like a queue: a lease locks dead
// letters under a token until locked_until, and a settle checks the
// token. Dead letters are few and rarely received, so a lease reads them
// in sequence order and passes over the locked ones.

func (s *tenantStore) LeaseDeadLetters(ctx context.Context, p *store.LeaseParams) ([]sluicetype.DeadLetter, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: lease dead letters: %w", err)
	}
	var out []sluicetype.DeadLetter
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		rows, err := s.e.query(ctx, tx, qSelectDeadLetterReady, s.t.Service, s.t.Provider, p.Queue, qr.now, p.Max)
		if err != nil {
			return err
		}
		for rows.Next() {
			d, err := scanDeadLetter(&rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("SelectDeadLetterReady: %w", err)
			}
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("SelectDeadLetterReady: %w", err)
		}
		if len(out) == 0 {
			return nil
		}
		token, until := newToken(), qr.now+ms(p.Visibility)
		seqs := make([]int64, len(out))
		for i := range out {
			seqs[i] = out[i].Seq
			out[i].Receipt = sluicetype.Receipt{Seq: out[i].Seq, Token: token}
			out[i].LockedUntil = fromMS(until)
		}
		_, err = s.e.exec(ctx, tx, qLockDeadLetterRows, token, until, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(seqs))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: lease dead letters: %w", err)
	}
	return out, nil
}

func (s *tenantStore) SettleDeadLetters(ctx context.Context, p *store.SettleParams) ([]store.SettleResult, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: settle dead letters: %w", err)
	}
	switch p.Action {
	case store.Complete, store.Abandon, store.Extend:
	default:
		return nil, fmt.Errorf("sluice: settle dead letters: %s does not apply to a dead letter: %w", p.Action, sluicetype.ErrInvalidArgument)
	}
	if p.Properties != nil || p.Delay > 0 {
		return nil, fmt.Errorf("sluice: settle dead letters: a dead letter's properties and delay cannot change: %w", sluicetype.ErrInvalidArgument)
	}
	var res []store.SettleResult
	err := s.e.inTx(ctx, func(tx *sql.Tx) error {
		qr, err := s.e.getQueue(ctx, tx, s.t, p.Queue)
		if err != nil {
			return err
		}
		all := make([]int64, 0, len(p.Receipts))
		for _, rc := range p.Receipts {
			all = append(all, rc.Seq)
		}
		slices.Sort(all)
		all = slices.Compact(all)
		rows, err := s.e.query(ctx, tx, qSelectHeldDeadLetters, s.t.Service, s.t.Provider, p.Queue, qr.now, s.e.d.IntList(all))
		if err != nil {
			return err
		}
		held := make(map[int64]int64)
		for rows.Next() {
			var seq, token int64
			if err := rows.Scan(&seq, &token); err != nil {
				rows.Close()
				return fmt.Errorf("SelectHeldDeadLetters: %w", err)
			}
			held[seq] = token
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("SelectHeldDeadLetters: %w", err)
		}
		res = make([]store.SettleResult, len(p.Receipts))
		var mine []int64
		for i, rc := range p.Receipts {
			if tok, ok := held[rc.Seq]; !ok || tok != rc.Token {
				res[i].Err = fmt.Errorf("dead letter %d: %w", rc.Seq, sluicetype.ErrLockLost)
				continue
			}
			if p.Action != store.Extend {
				delete(held, rc.Seq)
			}
			mine = append(mine, rc.Seq)
		}
		if len(mine) == 0 {
			return nil
		}
		slices.Sort(mine)
		mine = slices.Compact(mine)
		list := s.e.d.IntList(mine)
		switch p.Action {
		case store.Complete:
			_, err = s.e.exec(ctx, tx, qDeleteDeadLetters, s.t.Service, s.t.Provider, p.Queue, list)
		case store.Abandon:
			_, err = s.e.exec(ctx, tx, qUnlockDeadLetters, s.t.Service, s.t.Provider, p.Queue, list)
		case store.Extend:
			until := qr.now + ms(p.Extension)
			_, err = s.e.exec(ctx, tx, qExtendDeadLetters, until, s.t.Service, s.t.Provider, p.Queue, list)
			for i := range res {
				if res[i].Err == nil {
					res[i].LockedUntil = fromMS(until)
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: settle dead letters: %w", err)
	}
	return res, nil
}

func (s *tenantStore) PeekDeadLetters(ctx context.Context, p *store.PeekParams) ([]sluicetype.DeadLetter, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	if err := s.mustExist(ctx, p.Queue); err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	rows, err := s.e.query(ctx, s.e.r, qPeekDeadLetters, s.t.Service, s.t.Provider, p.Queue, p.FromSeq, p.Max)
	if err != nil {
		return nil, fmt.Errorf("sluice: peek dead letters: %w", err)
	}
	defer rows.Close()
	var out []sluicetype.DeadLetter
	for rows.Next() {
		d, err := scanDeadLetter(&rows)
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
		found, err := s.e.int64s(ctx, tx, qLockDeadLetters, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(sorted))
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
		if _, err := s.e.exec(ctx, tx, qResubmitDeadLetters, qr.now, expires, js, s.t.Service, s.t.Provider, p.Queue); err != nil {
			return err
		}
		if _, err := s.e.exec(ctx, tx, qDeleteDeadLetters, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(sorted)); err != nil {
			return err
		}
		if qr.settings.RequiresSession {
			if _, err := s.e.exec(ctx, tx, qActivateSessions, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(out)); err != nil {
				return err
			}
		}
		if s.e.d.Capabilities.NotifyOnReserve {
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
			seqs, err := s.e.int64s(ctx, tx, qSelectDeadLetterSeqs, s.t.Service, s.t.Provider, queue, purgeBatch)
			if err != nil || len(seqs) == 0 {
				n = 0
				return err
			}
			n, err = s.e.exec(ctx, tx, qDeleteDeadLetters, s.t.Service, s.t.Provider, queue, s.e.d.IntList(seqs))
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
		n, err = s.e.exec(ctx, tx, qDeleteDeadLetters, s.t.Service, s.t.Provider, queue, s.e.d.IntList(sorted))
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
	rows, err := s.e.query(ctx, s.e.r, qCountDeadLettersByReason, s.t.Service, s.t.Provider, queue)
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
