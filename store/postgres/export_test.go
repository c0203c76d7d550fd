package postgres

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// OpenWithFloorGap opens as Open does, with leases raising a queue's
// ready floor once it lags by more than gap.
func OpenWithFloorGap(ctx context.Context, cfg Config, gap int64) (store.Backend, error) {
	cfg.readyFloorGap = gap
	return Open(ctx, cfg)
}

// RaiseReadyFloorSQL is the statement that raises a queue's ready floor
// (arguments service, provider, queue).
func RaiseReadyFloorSQL() (string, error) {
	q, err := engine.ParseQueries(dialect().Queries)
	return q["RaiseReadyFloor"], err
}
