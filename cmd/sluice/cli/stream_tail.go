package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// tailSpec says what a tail follows and where its events go.
type tailSpec struct {
	// Namespace is followed, or only its stream Key when set.
	Namespace, Key string
	// started is called once the tail knows where each partition ends:
	// the events published after are the tail's.
	started func(partitions int)
	// each receives the events in order within each partition; an error
	// ends the tail with it.
	each func(partition int32, r sluicetype.Record) error
	// trimmed reports records retention deleted before the tail read them.
	trimmed func(partition int32, from, to int64)
}

// Following partition logs.
const (
	tailBatch = 256
	tailPoll  = 200 * time.Millisecond
)

// tail follows the partitions of a namespace (or the one of a stream)
// from their current ends by reading the logs, so that it stores nothing
// and holds back no retention. A wake-up of this process's appends, or of
// any process's on PostgreSQL, reads at once; otherwise it polls.
func (l *library) tail(ctx context.Context, t tailSpec) error {
	if err := store.ValidateName("namespace", t.Namespace); err != nil {
		return err
	}
	parts := make([]int32, l.partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	if t.Key != "" {
		if err := store.ValidateKey(t.Key); err != nil {
			return err
		}
		parts = []int32{sluice.PartitionOf(sluice.StreamID{Namespace: t.Namespace, Key: t.Key}, l.partitions)}
	}
	wake, stop := l.watch(parts)
	defer stop()
	after := make([]int64, len(parts))
	for i, p := range parts {
		info, err := l.st.PartitionInfo(ctx, p)
		if err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		after[i] = info.Head
	}
	t.started(len(parts))
	for {
		for i, p := range parts {
			var err error
			if after[i], err = l.follow(ctx, t, p, after[i]); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-time.After(tailPoll):
		}
	}
}

// follow hands t the records of a partition after a position, and
// returns the last position read.
func (l *library) follow(ctx context.Context, t tailSpec, p int32, after int64) (int64, error) {
	for {
		recs, err := l.st.Read(ctx, &store.ReadParams{Partition: p, After: after, Max: tailBatch})
		if errors.Is(err, sluice.ErrTrimmed) {
			info, err := l.st.PartitionInfo(ctx, p)
			if err != nil {
				return after, fmt.Errorf("partition %d: %w", p, err)
			}
			t.trimmed(p, after+1, info.Trimmed)
			after = info.Trimmed
			continue
		}
		if err != nil {
			return after, fmt.Errorf("partition %d: %w", p, err)
		}
		for _, r := range recs {
			after = r.Position
			if r.Namespace == t.Namespace && (t.Key == "" || r.Key == t.Key) {
				if err := t.each(p, r); err != nil {
					return after, err
				}
			}
		}
		if len(recs) < tailBatch {
			return after, nil
		}
	}
}

// watch returns a channel woken when any of the partitions may have
// grown, and a function that stops the watches.
func (l *library) watch(parts []int32) (<-chan struct{}, func()) {
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var stops []func()
	for _, p := range parts {
		ch, stop := l.st.WatchPartition(p)
		stops = append(stops, stop)
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-ch:
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	return wake, func() {
		close(done)
		wg.Wait()
		for _, stop := range stops {
			stop()
		}
	}
}
