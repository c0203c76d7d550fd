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
		rows, err := s.e.query(ctx, tx, "SelectDeadLetterReady", s.t.Service, s.t.Provider, p.Queue, qr.now, p.Max)
		if err != nil {
			return err
		}
		for rows.Next() {
			d, err := scanDeadLetter(rows)
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
		_, err = s.e.exec(ctx, tx, "LockDeadLetterRows", token, until, s.t.Service, s.t.Provider, p.Queue, s.e.d.IntList(seqs))
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
		rows, err := s.e.query(ctx, tx, "SelectHeldDeadLetters", s.t.Service, s.t.Provider, p.Queue, qr.now, s.e.d.IntList(all))
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
			_, err = s.e.exec(ctx, tx, "DeleteDeadLetters", s.t.Service, s.t.Provider, p.Queue, list)
		case store.Abandon:
			_, err = s.e.exec(ctx, tx, "UnlockDeadLetters", s.t.Service, s.t.Provider, p.Queue, list)
		case store.Extend:
			until := qr.now + ms(p.Extension)
			_, err = s.e.exec(ctx, tx, "ExtendDeadLetters", until, s.t.Service, s.t.Provider, p.Queue, list)
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
