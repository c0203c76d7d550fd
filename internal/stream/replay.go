package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Replays of parked events go through the agent that pulls the event's
// partition, as the next event of its stream: once the stream's delivery
// in progress (live or replayed) has ended, and before the stream's live
// events still waiting. So a stream's deliveries never overlap, replayed
// or not, and a replay counts toward the consumer's MaxConcurrency.

// replayReq asks an agent to deliver a parked event again.
type replayReq struct {
	// ctx is the replay's: its end cuts the delivery short.
	ctx  context.Context
	sub  string
	rec  sluicetype.Record
	done chan replayDone // buffered: the agent never waits on it
}

// replayDone is a replay's outcome.
type replayDone struct {
	attempts int
	err      error
	// stopped: neither delivered nor failed (the replay's context ended,
	// the lease may have ended, or the subscription halted or went).
	stopped bool
	// epoch is the lease the delivery ran under, to fence a new park.
	epoch int64
}

func (r *replayReq) reply(d replayDone) {
	select {
	case r.done <- d:
	default:
	}
}

var (
	errSubscriptionGone = fmt.Errorf("the subscription was deleted: %w", sluicetype.ErrSubscriptionNotFound)
	errAgentStopped     = errors.New("the partition's agent stopped")
)

// dropReplays answers the replays not started yet with err.
func (s *subState) dropReplays(err error) {
	for _, r := range s.replays {
		r.reply(replayDone{stopped: true, err: err})
	}
	s.replays = nil
}

// queueReplay takes a replay in, listing subscriptions again if it names
// one the agent does not know yet.
func (a *agent) queueReplay(r *replayReq) {
	s := a.subs[r.sub]
	if s == nil {
		if err := a.refreshSubs(); err != nil {
			r.reply(replayDone{stopped: true, err: err})
			return
		}
		a.refreshed = time.Now()
		s = a.subs[r.sub]
	}
	switch {
	case s == nil:
		r.reply(replayDone{stopped: true, err: fmt.Errorf("subscription %q on partition %d: %w", r.sub, a.partition, sluicetype.ErrSubscriptionNotFound)})
	case s.c == nil:
		r.reply(replayDone{stopped: true, err: fmt.Errorf("consumer %q is not registered on this node: %w", s.sub.Consumer, sluicetype.ErrInvalidArgument)})
	default:
		s.replays = append(s.replays, r)
	}
}

// startReplays starts the replays whose stream has no delivery in
// progress, in the order asked for, within the consumer's concurrency.
// The agent owns the partition and the subscription is not draining.
func (a *agent) startReplays(s *subState) {
	kept := s.replays[:0]
	for _, r := range s.replays {
		if err := r.ctx.Err(); err != nil {
			r.reply(replayDone{stopped: true, err: context.Cause(r.ctx)})
			continue
		}
		key := r.rec.Key
		q := s.streams[key]
		if s.inflight >= s.c.MaxConcurrency || q != nil && q.busy {
			kept = append(kept, r)
			continue
		}
		if q == nil {
			q = &streamQueue{}
			s.streams[key] = q
		}
		q.busy = true
		s.inflight++
		s.startedGen = s.gen
		a.inDelivery.start()
		go a.deliverReplay(s, s.deliveryCtx(a.leaseCtx), s.c, s.gen, r)
	}
	clear(s.replays[len(kept):])
	s.replays = kept
}

// deliverReplay runs in its own goroutine, as deliver does, for a
// replayed event: no failure policy applies (the event stays parked,
// with its new error, when every attempt failed).
func (a *agent) deliverReplay(s *subState, ctx context.Context, c *Consumer, gen int, r *replayReq) {
	defer a.inDelivery.end()
	// It ends with the replay's request too.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(r.ctx, func() { cancel(context.Cause(r.ctx)) })()
	attempts, stopped, err := c.deliver(ctx, EventOf(&r.rec, a.partition, r.sub), a.owns, a.inDelivery)
	if stopped && err == nil {
		err = context.Cause(ctx)
	}
	a.report(result{s: s, gen: gen, key: r.rec.Key, pos: r.rec.Position, err: err, attempts: attempts, stopped: stopped, replay: r})
}

// resolveReplay answers a finished replay and frees its stream: its
// live events waiting go next.
func (a *agent) resolveReplay(r result) {
	r.replay.reply(replayDone{attempts: r.attempts, err: r.err, stopped: r.stopped, epoch: a.epoch})
	s := r.s
	q := s.streams[r.key]
	if cur, ok := a.subs[s.sub.ID]; !ok || cur != s || r.gen != s.gen || q == nil {
		return // unsubscribed or halted meanwhile
	}
	q.busy = false
	if len(q.items) > 0 {
		s.ready = append(s.ready, r.key)
	} else {
		delete(s.streams, r.key)
	}
}

// replay has the agent deliver rec again to a subscription, and waits
// for the outcome until ctx ends or the agent stops.
func (a *agent) replay(ctx context.Context, sub string, rec sluicetype.Record) (replayDone, error) {
	r := &replayReq{ctx: ctx, sub: sub, rec: rec, done: make(chan replayDone, 1)}
	select {
	case a.replays <- r:
	case <-a.done:
		return replayDone{}, errAgentStopped
	case <-ctx.Done():
		return replayDone{}, context.Cause(ctx)
	}
	select {
	case d := <-r.done:
		return d, nil
	case <-a.done:
		// It answered every replay before it stopped, unless it was
		// fenced first.
		select {
		case d := <-r.done:
			return d, nil
		default:
			return replayDone{}, errAgentStopped
		}
	}
}

// agentOf returns the agent pulling a partition (nil: none on this node).
func (n *Node) agentOf(partition int32) *agent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agents[partition]
}

// Replay delivers a subscription's parked events again, oldest first, at
// most max of them, through the agents of this node that pull their
// partitions: each goes as the next event of its stream, after the
// stream's delivery in progress and before its live events waiting, with
// the consumer's retries. Each one delivered leaves the parked events;
// one that fails again stays, with its new error, and the replay stops
// there. Events of partitions this node does not pull stay parked for a
// replay on the node that does: Replay delivers the others and then
// fails with ErrPartitionNotPulled, saying how many it left. It returns
// how many were delivered; when ctx ends, the event in delivery stays
// parked as it was. Markers of retention gaps (RetentionGapProperty)
// stay parked (a parked retention removes them).
func (n *Node) Replay(ctx context.Context, subscription string, max int) (int, error) {
	subs, err := n.st.Subscriptions(ctx, &store.SubscriptionFilter{ID: subscription})
	if err != nil {
		return 0, err
	}
	if len(subs) == 0 {
		return 0, fmt.Errorf("sluice: replay: subscription %q: %w", subscription, sluicetype.ErrSubscriptionNotFound)
	}
	if _, ok := n.consumers[subs[0].Consumer]; !ok {
		return 0, fmt.Errorf("sluice: replay: consumer %q is not registered on this node: %w", subs[0].Consumer, sluicetype.ErrInvalidArgument)
	}
	done, left := 0, 0
	after := store.ParkedParams{Subscription: subscription}
	for done < max {
		after.Max = min(max-done, 100)
		parked, err := n.st.Parked(ctx, &after)
		if err != nil || len(parked) == 0 {
			return done, notPulled(left, err)
		}
		for _, p := range parked {
			after.AfterPartition, after.AfterPosition = p.Partition, p.Position
			if _, gap := p.Properties[RetentionGapProperty]; gap {
				continue // a marker of a retention gap: nothing to deliver
			}
			a := n.agentOf(p.Partition)
			if a == nil {
				left++
				continue
			}
			if err := n.replayOne(ctx, a, subscription, p); err != nil {
				return done, err
			}
			done++
			if done == max {
				break
			}
		}
	}
	return done, notPulled(left, nil)
}

// notPulled reports the parked events a replay left for another node.
func notPulled(left int, err error) error {
	if err != nil || left == 0 {
		return err
	}
	return fmt.Errorf("sluice: replay: %d parked events are on partitions another node pulls: %w", left, sluicetype.ErrPartitionNotPulled)
}

// replayOne replays one parked event through its partition's agent and
// stores the outcome: unparked once delivered, parked again with its new
// error (under the agent's lease) when it failed.
func (n *Node) replayOne(ctx context.Context, a *agent, subscription string, p store.ParkedEvent) error {
	d, err := a.replay(ctx, subscription, p.Record)
	if err == nil && d.stopped {
		err = d.err
	}
	if err != nil {
		return fmt.Errorf("sluice: replay of position %d of partition %d: %w", p.Position, p.Partition, err)
	}
	if d.err != nil {
		p.Error, p.Attempts = store.Truncate(d.err.Error(), store.MaxReasonLen), p.Attempts+d.attempts
		fence := &store.Fence{Group: n.cfg.Group, Partition: p.Partition, Epoch: d.epoch}
		if err := n.st.Park(ctx, &store.ParkParams{Subscription: subscription, Events: []store.ParkedEvent{p}, Fence: fence}); err != nil {
			return err
		}
		return fmt.Errorf("sluice: replay of position %d of partition %d: %w", p.Position, p.Partition, d.err)
	}
	return n.st.Unpark(ctx, &store.UnparkParams{Subscription: subscription,
		Events: []store.ParkedID{{Partition: p.Partition, Position: p.Position}}})
}
