package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// demo walks through the storage primitives and the stream API on an
// embedded SQLite file and prints each step.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", filepath.Join("sluice-data", "demo.db"), "database DSN (a SQLite path by default)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if err := runDemo(ctx, *db, stdout); err != nil {
		fmt.Fprintln(stderr, "sluice demo:", err)
		return ExitError
	}
	return ExitOK
}

func runDemo(ctx context.Context, dsn string, out io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	b, err := sluice.OpenBackend(ctx, dsn, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	host, _ := os.Hostname()
	// Each run is its own tenant, so runs never see each other's rows.
	tenant := store.Tenant{Service: "demo", Provider: fmt.Sprintf("run-%d", time.Now().UnixNano())}
	s, err := b.Store(tenant)
	if err != nil {
		return err
	}
	say("sluice demo on %s (%s backend), tenant %s/%s, host %s", sluice.RedactDSN(dsn), b.Features().Name, tenant.Service, tenant.Provider, host)

	const q = "orders"
	if err := s.CreateQueue(ctx, &store.QueueSettings{Name: q, MaxDeliveryCount: 2}); err != nil {
		return err
	}
	say("\ncreated queue %q (max delivery count 2)", q)

	seqs, err := s.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: []store.NewMessage{
		{MessageID: "order-1", ContentType: "text/plain", Payload: []byte("one pizza")},
		{MessageID: "order-2", ContentType: "text/plain", Payload: []byte("two salads")},
		{MessageID: "order-3", ContentType: "text/plain", Payload: []byte("a poison pill"), Properties: map[string]string{"kind": "poison"}},
	}})
	if err != nil {
		return err
	}
	say("sent 3 messages in one atomic batch: sequence numbers %v", seqs)

	lease := func() ([]sluicetype.Leased, error) {
		return s.Lease(ctx, &store.LeaseParams{Queue: q, Max: 10, Visibility: 30 * time.Second})
	}
	got, err := lease()
	if err != nil {
		return err
	}
	for _, m := range got {
		say("leased #%d %q (delivery %d, locked until %s)", m.Seq, m.Payload, m.DeliveryCount, m.LockedUntil.Format(time.TimeOnly))
	}
	settle := func(action store.SettleAction, m sluicetype.Leased, reason string) error {
		res, err := s.Settle(ctx, &store.SettleParams{Queue: q, Action: action, Receipts: []sluicetype.Receipt{m.Receipt}, Reason: reason})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	if err := settle(store.Complete, got[0], ""); err != nil {
		return err
	}
	say("completed #%d: it is gone", got[0].Seq)
	if err := settle(store.Complete, got[0], ""); errors.Is(err, sluicetype.ErrLockLost) {
		say("completed #%d again with the same receipt: %v (nothing changed)", got[0].Seq, err)
	}
	if err := settle(store.DeadLetter, got[1], "OutOfStock"); err != nil {
		return err
	}
	say("dead-lettered #%d with reason OutOfStock", got[1].Seq)
	if err := settle(store.Abandon, got[2], ""); err != nil {
		return err
	}
	say("abandoned #%d: it is available again", got[2].Seq)

	again, err := lease()
	if err != nil {
		return err
	}
	for _, m := range again {
		say("leased #%d %q again (delivery %d)", m.Seq, m.Payload, m.DeliveryCount)
		if err := settle(store.Abandon, m, ""); err != nil {
			return err
		}
		say("abandoned #%d on its last allowed delivery: it moves to dead letters", m.Seq)
	}

	dead, err := s.PeekDeadLetters(ctx, &store.PeekParams{Queue: q, Max: 10})
	if err != nil {
		return err
	}
	say("\ndead letters of %q:", q)
	for _, d := range dead {
		say("  #%d %q reason=%s (%s)", d.Seq, d.Payload, d.Reason, d.Description)
	}
	resub, err := s.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{dead[0].Seq}})
	if err != nil {
		return err
	}
	say("resubmitted #%d as new message #%d", dead[0].Seq, resub[0])
	st, err := s.QueueStats(ctx, q)
	if err != nil {
		return err
	}
	say("stats: active=%d scheduled=%d in-flight=%d dead-lettered=%d", st.Active, st.Scheduled, st.InFlight, st.DeadLettered)

	say("\npartition log 0:")
	res, err := s.Append(ctx, &store.AppendParams{Partition: 0, Records: []store.NewRecord{
		{Namespace: "cart", Key: "alice", Payload: []byte("added apples")},
		{Namespace: "cart", Key: "bob", Payload: []byte("added bread")},
		{Namespace: "cart", Key: "alice", Payload: []byte("checked out")},
	}})
	if err != nil {
		return err
	}
	say("appended 3 records at positions %d..%d", res.First, res.Last)
	recs, err := s.Read(ctx, &store.ReadParams{Partition: 0, After: 1, Max: 10})
	if err != nil {
		return err
	}
	for _, r := range recs {
		say("  read position %d: %s/%s %q", r.Position, r.Namespace, r.Key, r.Payload)
	}
	if err := demoStreams(ctx, b, tenant, say); err != nil {
		return err
	}
	say("\ndone.")
	return nil
}

// demoStreams publishes to two streams and handles them with a stream
// processor: each stream's events arrive in order.
func demoStreams(ctx context.Context, b store.Backend, tenant store.Tenant, say func(string, ...any)) error {
	c, err := sluice.NewClient(b, &sluice.Options{Service: tenant.Service, Provider: tenant.Provider})
	if err != nil {
		return err
	}
	say("\nstreams:")
	got := make(chan string, 8)
	p := c.NewStreamProcessor(nil)
	err = p.Handle("shipping", func(ctx context.Context, ev *sluice.StreamEvent) error {
		got <- fmt.Sprintf("  shipping got %s/%s #%d: %s", ev.Namespace, ev.Key, ev.Position, ev.Body)
		return nil
	}, &sluice.ConsumerOptions{Namespace: "orders"})
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	defer p.Stop(ctx)
	say("started a stream processor; consumer shipping takes every stream of namespace orders")
	for _, e := range []struct{ key, body string }{
		{"order-1", "placed"}, {"order-2", "placed"}, {"order-1", "paid"}, {"order-1", "shipped"},
	} {
		id := sluice.StreamID{Namespace: "orders", Key: e.key}
		pos, err := c.Publish(ctx, id, sluice.Event{Body: []byte(e.body)})
		if err != nil {
			return err
		}
		say("published %q to %s at position %d of partition %d", e.body, id, pos[0], sluice.PartitionOf(id, 16))
	}
	for range 4 {
		select {
		case line := <-got:
			say("%s", line)
		case <-time.After(10 * time.Second):
			return errors.New("the stream processor delivered nothing for 10 s")
		}
	}
	return nil
}
