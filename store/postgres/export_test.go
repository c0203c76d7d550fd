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
	cfg.readyFloorGap = 1
	return Open(ctx, cfg)
}

// RaiseReadyFloorSQL is the statement that raises a queue's ready floor
// (arguments service, provider, queue).
func RaiseReadyFloorSQL() (string, error) {
	q, err := engine.ParseQueries(dialect().Queries)
	return q["RaiseReadyFloor"], err
}
