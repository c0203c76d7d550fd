package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/store"
)

// TailOptions say what else a tail reports. Nil fields report nothing.
type TailOptions struct {
	// Started is called once the tail knows where each partition it
	// follows ends: the events published after are the tail's.
	Started func(partitions int)
	// Trimmed reports records retention deleted before the tail read
	// them: positions from to to of a partition.
	Trimmed func(partition int32, from, to int64)
}

// Following partition logs.
const (
	tailBatch = 256
	tailPoll  = 200 * time.Millisecond
)

// TailStream follows the streams of a namespace, or only its stream key
// when key is set, from now on: it hands each event published after it
// started to each, in order within each partition (StreamEvent's
// Subscription is empty and Attempt 0), until ctx ends (it then returns
// ctx's error) or each returns an error (which it returns). It only
// reads the partition logs: it stores no subscription and holds back no
// retention, so events retention deletes before the tail reads them are
// skipped (reported through opts.Trimmed). A publish in this process, or
// on PostgreSQL in any, is read at once; otherwise the tail polls every
// 200 ms.
func (c *Client) TailStream(ctx context.Context, namespace, key string, each func(*StreamEvent) error, opts *TailOptions) error {
	var o TailOptions
	if opts != nil {
		o = *opts
	}
	if err := store.ValidateName("namespace", namespace); err != nil {
		return fmt.Errorf("sluice: tail: %w", err)
	}
	n, err := c.streamPartitions(ctx)
	if err != nil {
		return err
	}
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	if key != "" {
		if err := store.ValidateKey(key); err != nil {
			return fmt.Errorf("sluice: tail: %w", err)
		}
		parts = []int32{PartitionOf(StreamID{Namespace: namespace, Key: key}, n)}
	}
	wake, stop := c.watchPartitions(parts)
	defer stop()
	after := make([]int64, len(parts))
	for i, p := range parts {
		info, err := c.st.PartitionInfo(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sluice: tail: partition %d: %w", p, err)
		}
		after[i] = info.Head
	}
	if o.Started != nil {
		o.Started(len(parts))
	}
	t := tail{c: c, namespace: namespace, key: key, each: each, trimmed: o.Trimmed}
	for {
		for i, p := range parts {
			var err error
			if after[i], err = t.follow(ctx, p, after[i]); err != nil {
				if h, ok := err.(handlerError); ok {
					return h.err
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
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

// tail is a TailStream in progress.
type tail struct {
	c              *Client
	namespace, key string
	each           func(*StreamEvent) error
	trimmed        func(partition int32, from, to int64)
}

// handlerError is an error of the tail's handler, returned as it is.
type handlerError struct{ err error }

func (h handlerError) Error() string { return h.err.Error() }

// follow hands the tail the records of a partition after a position, and
// returns the last position read.
func (t *tail) follow(ctx context.Context, p int32, after int64) (int64, error) {
	for {
		recs, err := t.c.st.Read(ctx, &store.ReadParams{Partition: p, After: after, Max: tailBatch})
		if errors.Is(err, ErrTrimmed) {
			info, err := t.c.st.PartitionInfo(ctx, p)
			if err != nil {
				return after, fmt.Errorf("sluice: tail: partition %d: %w", p, err)
			}
			if t.trimmed != nil {
				t.trimmed(p, after+1, info.Trimmed)
			}
			after = info.Trimmed
			continue
		}
		if err != nil {
			return after, fmt.Errorf("sluice: tail: partition %d: %w", p, err)
		}
		for i := range recs {
			r := &recs[i]
			after = r.Position
			if r.Namespace == t.namespace && (t.key == "" || r.Key == t.key) {
				ev := stream.EventOf(r, p, "")
				if err := t.each(&ev); err != nil {
					return after, handlerError{err}
				}
			}
		}
		if len(recs) < tailBatch {
			return after, nil
		}
	}
}

// watchPartitions returns a channel woken when any of the partitions may
// have grown, and a function that stops the watches.
func (c *Client) watchPartitions(parts []int32) (<-chan struct{}, func()) {
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var stops []func()
	for _, p := range parts {
		ch, stop := c.st.WatchPartition(p)
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
