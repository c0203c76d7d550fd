package sluice_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The duration rule at the library's edge: negative refused with nothing
// written, Forever (math.MaxInt64) meaning never, Service Bus maxima
// refused past them, and no stored time negative or wrapped.
func TestDurationEdges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		for _, bad := range []sluice.QueueProperties{
			{DefaultTTL: -time.Nanosecond}, {DeadLetterRetention: -time.Second},
			{LockDuration: -time.Second}, {LockDuration: sluice.MaxLockDuration + time.Millisecond}, {LockDuration: sluice.Forever},
			{RequiresDuplicateDetection: true, DuplicateDetectionWindow: -time.Second},
			{RequiresDuplicateDetection: true, DuplicateDetectionWindow: sluice.Forever},
		} {
			name := "bad-" + randHex(4)
			_, err := c.CreateQueue(ctx, name, &bad)
			wantErr(t, "CreateQueue with a refused duration", err, sluice.ErrInvalidArgument)
			_, err = c.GetQueue(ctx, name)
			wantErr(t, "GetQueue of the refused queue", err, sluice.ErrEntityNotFound)
		}
		_, err := c.CreateTopic(ctx, "t-"+randHex(4), &sluice.TopicProperties{DefaultTTL: -1})
		wantErr(t, "CreateTopic with a negative TTL", err, sluice.ErrInvalidArgument)

		q, err := c.CreateQueue(ctx, "forever-"+randHex(4), &sluice.QueueProperties{
			DefaultTTL: time.Duration(math.MaxInt64), DeadLetterRetention: sluice.Forever, DeadLetterOnExpiry: true})
		if err != nil {
			t.Fatal(err)
		}
		if q.DefaultTTL != 0 || q.DeadLetterRetention != 0 {
			t.Fatalf("Forever read back as TTL %v, retention %v; want 0 (never)", q.DefaultTTL, q.DeadLetterRetention)
		}
		s := newSender(t, c, q.Name)
		_, err = s.Send(ctx, &sluice.Message{Body: []byte("bad"), TimeToLive: -time.Second})
		wantErr(t, "Send with a negative TTL", err, sluice.ErrInvalidArgument)
		for _, ttl := range []time.Duration{sluice.Forever, sluice.Forever - 1, sluice.Forever - time.Millisecond} {
			if _, err := s.Send(ctx, &sluice.Message{Body: []byte("m"), TimeToLive: ttl}); err != nil {
				t.Fatalf("Send with TTL %v: %v", ttl, err)
			}
		}
		r := newReceiver(t, c, q.Name, sluice.PeekLock)
		ms := receive(t, r, 10)
		if len(ms) != 3 {
			t.Fatalf("received %d messages, want the 3 long-lived ones (none dropped as expired)", len(ms))
		}
		far := time.Now().Add(100 * 365 * 24 * time.Hour)
		for _, m := range ms {
			if !m.ExpiresAt.IsZero() && m.ExpiresAt.Before(far) {
				t.Fatalf("message %d: ExpiresAt %v, want never or far in the future", m.SequenceNumber, m.ExpiresAt)
			}
		}
		if reasons, err := c.DeadLetterReasons(ctx, q.Name); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters: %v, %v", reasons, err)
		}

		err = c.SetStreamRetention(ctx, "ns", sluice.StreamRetention{MaxAge: -time.Second})
		wantErr(t, "SetStreamRetention with a negative age", err, sluice.ErrInvalidArgument)
		if err := c.SetStreamRetention(ctx, "ns", sluice.StreamRetention{MaxAge: sluice.Forever}); err != nil {
			t.Fatal(err)
		}
		p := c.NewStreamProcessor(nil)
		err = p.Handle("c", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{DeliveryTimeout: -time.Second})
		wantErr(t, "Handle with a negative delivery timeout", err, sluice.ErrInvalidArgument)
	})
}

// A stream processor's durations follow the rule too: a negative one, or
// a heartbeat or failure timeout too long for the balancer's sums, fails
// Start with ErrInvalidArgument, and nothing runs.
func TestStreamProcessorDurationEdges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		for _, bad := range []sluice.StreamProcessorOptions{
			{HeartbeatInterval: -time.Second}, {FailureTimeout: -1}, {PollInterval: -time.Millisecond},
			{IdlePollInterval: -time.Second}, {ProgressInterval: -1}, {RefreshInterval: -time.Second},
			{HeartbeatInterval: sluice.Forever}, {FailureTimeout: sluice.Forever},
		} {
			p := c.NewStreamProcessor(&bad)
			if err := p.Handle("c-"+randHex(4), func(context.Context, *sluice.StreamEvent) error { return nil },
				&sluice.ConsumerOptions{Namespace: "ns"}); err != nil {
				t.Fatal(err)
			}
			err := p.Start(t.Context())
			wantErr(t, fmt.Sprintf("Start with %+v", bad), err, sluice.ErrInvalidArgument)
		}
		p := c.NewStreamProcessor(nil)
		err := p.Handle("c-"+randHex(4), func(context.Context, *sluice.StreamEvent) error { return nil },
			&sluice.ConsumerOptions{Namespace: "ns", DeliveryTimeout: -time.Second})
		wantErr(t, "Handle with a negative delivery timeout", err, sluice.ErrInvalidArgument)
	})
}
