package postgres

import (
	"context"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
)

// OpenRaisingFloors opens as Open does, with every queue's ready floor
// raised after nearly every lease (a gap of one message), so that raises
// race everything a test does.
func OpenRaisingFloors(ctx context.Context, cfg Config) (store.Backend, error) {
	return OpenWithFloorGap(ctx, cfg, 1)
}

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
