package server_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// An abandon's delay through the API: a negative one is refused and
// changes nothing; a positive one hides the message (peek: scheduled)
// that long, and in a session holds the session's later messages back.
func TestAbandonDelayAPI(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		c := e.Remote(t, nil)
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "work", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQueue(ctx, "sess", &sluice.QueueProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
		snd, _ := c.NewSender("work")
		if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		r, _ := c.NewReceiver("work", nil)
		ms, err := r.Receive(ctx, 1)
		if err != nil || len(ms) != 1 {
			t.Fatalf("Receive = %d messages, %v", len(ms), err)
		}
		wantErr(t, "Abandon with a negative delay", r.Abandon(ctx, ms[0], &sluice.AbandonOptions{Delay: -time.Second}), sluice.ErrInvalidArgument)
		const delay = 1500 * time.Millisecond
		start := time.Now()
		if err := r.Abandon(ctx, ms[0], &sluice.AbandonOptions{Delay: delay}); err != nil {
			t.Fatalf("Abandon with delay %v: %v", delay, err)
		}
		if p, err := r.Peek(ctx, 1, nil); err != nil || len(p) != 1 || p[0].State != sluice.StateScheduled {
			t.Fatalf("Peek after a delayed abandon = %+v, %v; want the message scheduled", p, err)
		}
		again, err := r.Receive(ctx, 1)
		if e := time.Since(start); e < delay-100*time.Millisecond {
			t.Fatalf("abandoned with delay %v, received again after %v", delay, e)
		}
		if err != nil || len(again) != 1 || again[0].DeliveryCount != 2 {
			t.Fatalf("Receive after the delay = %+v, %v; want the message on delivery 2", again, err)
		}

		ss, _ := c.NewSender("sess")
		for _, b := range []string{"1", "2"} {
			if _, err := ss.Send(ctx, &sluice.Message{Body: []byte(b), SessionID: "s"}); err != nil {
				t.Fatal(err)
			}
		}
		s, err := c.AcceptSession(ctx, "sess", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		first, err := s.Receive(ctx, 1)
		if err != nil || len(first) != 1 {
			t.Fatalf("session Receive = %+v, %v", first, err)
		}
		start = time.Now()
		if err := s.Abandon(ctx, first[0], &sluice.AbandonOptions{Delay: delay}); err != nil {
			t.Fatalf("session Abandon with delay %v: %v", delay, err)
		}
		rest, err := s.Receive(ctx, 2)
		if e := time.Since(start); e < delay-100*time.Millisecond {
			t.Fatalf("session message abandoned with delay %v: received %d messages after %v", delay, len(rest), e)
		}
		var bodies []string
		for _, m := range rest {
			bodies = append(bodies, string(m.Body))
		}
		if err != nil || !slices.Equal(bodies, []string{"1", "2"}) {
			t.Fatalf("session Receive after the delay = %v, %v; want [1 2]", bodies, err)
		}
	})
}
