package engine

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

func (s *tenantStore) Peek(ctx context.Context, p *store.PeekParams) ([]sluicetype.Message, error) {
	if err := p.Validate(s.e.limits); err != nil {
		return nil, fmt.Errorf("sluice: peek: %w", err)
	}
	qr, err := s.e.getQueue(ctx, s.e.r, s.t, p.Queue)
	if err != nil {
		return nil, fmt.Errorf("sluice: peek: %w", err)
	}
	rows, err := s.e.query(ctx, s.e.r, qPeekMessages, s.t.Service, s.t.Provider, p.Queue, p.FromSeq, p.Max)
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
