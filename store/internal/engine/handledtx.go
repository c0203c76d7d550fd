package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

var _ store.TxHandledRecorder = (*tenantStore)(nil)

// forgetEvery is how many first records of handled events go between two
// deletions of the records a subscription's stored position passed.
const forgetEvery = 16

// MarkHandledTx records a handled event in the caller's transaction.
func (s *tenantStore) MarkHandledTx(ctx context.Context, tx store.Tx, p *store.HandledParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("sluice: mark handled: %w", err)
	}
	q, err := s.e.foreign(tx)
	if err != nil {
		return false, fmt.Errorf("sluice: mark handled: %w", err)
	}
	n, err := s.e.exec(ctx, q, qMarkHandled, s.t.Service, s.t.Provider, p.Subscription, p.Partition, p.Position)
	if err != nil {
		return false, fmt.Errorf("sluice: mark handled: %w", s.e.wrap(err))
	}
	if n == 0 {
		return false, nil
	}
	if s.e.handled.Add(1)%forgetEvery == 0 {
		if err := s.forgetHandled(ctx, q, p); err != nil {
			return false, fmt.Errorf("sluice: mark handled: %w", s.e.wrap(err))
		}
	}
	return true, nil
}

// forgetHandled deletes the records of handled events at or below the
// subscription's stored position on the partition, read without a lock
// (a position only moves on, so an older reading deletes less).
func (s *tenantStore) forgetHandled(ctx context.Context, q querier, p *store.HandledParams) error {
	var through int64
	err := s.e.queryRow(ctx, q, qSelectSubscriptionPosition, []any{s.t.Service, s.t.Provider, p.Partition, p.Subscription}, &through)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("SelectSubscriptionPosition: %w", err)
	}
	_, err = s.e.exec(ctx, q, qForgetHandled, s.t.Service, s.t.Provider, p.Subscription, p.Partition, through)
	return err
}
