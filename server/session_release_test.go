package server_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// CloseSession is not a delivery: with MaxDeliveryCount 1 the message
// survives closes through the API (Service Bus counts a session lock that
// expires, not a close).
func TestCloseSessionIsNotADelivery(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		e := start(t, kind, server.Config{})
		ctx := t.Context()
		if _, err := e.Lib.CreateQueue(ctx, "s", &sluice.QueueProperties{RequiresSession: true, MaxDeliveryCount: 1}); err != nil {
			t.Fatal(err)
		}
		c := e.Remote(t, nil)
		snd, err := c.NewSender("s")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snd.Send(ctx, &sluice.Message{SessionID: "a", Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
		for round := 1; round <= 3; round++ {
			r, err := c.AcceptSession(ctx, "s", "a", nil)
			if err != nil {
				t.Fatalf("round %d: AcceptSession: %v", round, err)
			}
			ms, err := r.Receive(ctx, 1)
			if err != nil || len(ms) != 1 || ms[0].DeliveryCount != 1 {
				t.Fatalf("round %d: received %v, %v; want the message on its first delivery", round, ms, err)
			}
			if err := r.Close(ctx); err != nil {
				t.Fatalf("round %d: CloseSession: %v", round, err)
			}
		}
		if reasons, err := e.Lib.DeadLetterReasons(ctx, "s"); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters after closing sessions: %v, %v", reasons, err)
		}
	})
}
