package sluice_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

func seqsOf(ms []*sluice.ReceivedMessage) []int64 {
	out := []int64{}
	for _, m := range ms {
		out = append(out, m.SequenceNumber)
	}
	return out
}

// Browse finds messages by state, id, correlation id, subject, session
// and property, and dead letters by reason, a bounded page at a time.
func TestBrowse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
			t.Fatal(err)
		}
		s, _ := c.NewSender("orders")
		if _, err := s.SendBatch(ctx, []*sluice.Message{
			{Body: []byte("1"), MessageID: "a", CorrelationID: "c-1", Subject: "pizza", ApplicationProperties: map[string]string{"size": "L"}},
			{Body: []byte("2"), MessageID: "b", CorrelationID: "c-1", Subject: "pasta"},
			{Body: []byte("3"), MessageID: "c", ApplicationProperties: map[string]string{"size": "S"}},
			{Body: []byte("4"), MessageID: "d", ScheduledEnqueueTime: time.Now().Add(time.Hour)},
		}); err != nil {
			t.Fatal(err)
		}
		r, _ := c.NewReceiver("orders", nil)
		got, err := r.Receive(ctx, 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("Receive = %d, %v", len(got), err)
		}
		if err := r.DeadLetter(ctx, got[1], &sluice.DeadLetterOptions{Reason: "Burnt"}); err != nil {
			t.Fatal(err)
		}
		find := func(f sluice.MessageFilter) []int64 {
			t.Helper()
			page, err := r.Browse(ctx, 10, &sluice.BrowseOptions{Filter: f})
			if err != nil {
				t.Fatalf("Browse(%+v): %v", f, err)
			}
			if page.Next != 0 {
				t.Errorf("Browse(%+v) examined every message but says Next %d", f, page.Next)
			}
			return seqsOf(page.Messages)
		}
		for _, tc := range []struct {
			f    sluice.MessageFilter
			want []int64
		}{
			{sluice.MessageFilter{}, []int64{1, 3, 4}},
			{sluice.MessageFilter{MessageID: "c"}, []int64{3}},
			{sluice.MessageFilter{CorrelationID: "c-1"}, []int64{1}},
			{sluice.MessageFilter{Subject: "pizza"}, []int64{1}},
			{sluice.MessageFilter{Properties: map[string]string{"size": "S"}}, []int64{3}},
			{sluice.MessageFilter{Properties: map[string]string{"size": ""}}, []int64{}},
			{sluice.MessageFilter{States: []sluice.MessageState{sluice.StateLocked, sluice.StateScheduled}}, []int64{1, 4}},
			{sluice.MessageFilter{States: []sluice.MessageState{sluice.StateActive}, MessageID: "a"}, []int64{}},
		} {
			if got := find(tc.f); !slices.Equal(got, tc.want) {
				t.Errorf("Browse(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		}
		page, err := r.Browse(ctx, 10, &sluice.BrowseOptions{Filter: sluice.MessageFilter{States: []sluice.MessageState{sluice.StateLocked}}})
		if err != nil || len(page.Messages) != 1 || page.Messages[0].LockedUntil.IsZero() || string(page.Messages[0].Body) != "1" {
			t.Errorf("the locked message browses as %+v, %v", page.Messages, err)
		}

		dlq, _ := c.NewReceiver("orders", &sluice.ReceiverOptions{SubQueue: sluice.SubQueueDeadLetter})
		for reason, want := range map[string][]int64{"Burnt": {2}, "": {}} {
			page, err := dlq.Browse(ctx, 10, &sluice.BrowseOptions{Filter: sluice.MessageFilter{DeadLetterReason: &reason}})
			if err != nil || !slices.Equal(seqsOf(page.Messages), want) {
				t.Errorf("dead letters of reason %q: %v, %v; want %v", reason, seqsOf(page.Messages), err, want)
			}
		}
		reason := "Burnt"
		for _, bad := range []struct {
			r    *sluice.Receiver
			max  int
			opts *sluice.BrowseOptions
		}{
			{r, 0, nil}, {r, sluice.MaxPeek + 1, nil}, {r, 1, &sluice.BrowseOptions{FromSequenceNumber: -1}},
			{r, 1, &sluice.BrowseOptions{Filter: sluice.MessageFilter{DeadLetterReason: &reason}}},
			{r, 1, &sluice.BrowseOptions{Filter: sluice.MessageFilter{States: []sluice.MessageState{9}}}},
			{dlq, 1, &sluice.BrowseOptions{Filter: sluice.MessageFilter{States: []sluice.MessageState{sluice.StateActive}}}},
		} {
			if _, err := bad.r.Browse(ctx, bad.max, bad.opts); !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("Browse(%d, %+v) = %v, want ErrInvalidArgument", bad.max, bad.opts, err)
			}
		}
	})
}

// A search through more messages than one call examines goes on page by
// page, each bounded, and finds what is past the first.
func TestBrowseLongSearch(t *testing.T) {
	c, err := sluice.NewClient(shared.Backend(t, "sqlite"), &sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "big", nil); err != nil {
		t.Fatal(err)
	}
	s, _ := c.NewSender("big")
	total := sluice.MaxBrowseScan + 500
	for sent := 0; sent < total; sent += 1000 {
		batch := make([]*sluice.Message, min(1000, total-sent))
		for i := range batch {
			batch[i] = &sluice.Message{Body: []byte("x")}
		}
		if sent+len(batch) == total {
			batch[len(batch)-1].MessageID = "needle"
		}
		if _, err := s.SendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := c.NewReceiver("big", nil)
	opts := &sluice.BrowseOptions{Filter: sluice.MessageFilter{MessageID: "needle"}}
	var found []int64
	pages := 0
	for {
		page, err := r.Browse(ctx, 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		found = append(found, seqsOf(page.Messages)...)
		if page.Next == 0 {
			break
		}
		opts.FromSequenceNumber = page.Next
	}
	if !slices.Equal(found, []int64{int64(total)}) || pages != 2 {
		t.Errorf("the needle found as %v in %d pages; want [%d] in 2", found, pages, total)
	}
}

// DeleteMessages deletes named or oldest messages a lock does not hold;
// PurgeMessages deletes them all.
func TestDeleteAndPurgeMessages(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if _, err := c.CreateQueue(ctx, "jobs", nil); err != nil {
			t.Fatal(err)
		}
		s, _ := c.NewSender("jobs")
		batch := make([]*sluice.Message, 2500)
		for i := range batch {
			batch[i] = &sluice.Message{Body: fmt.Appendf(nil, "%d", i+1)}
		}
		for i := 0; i < len(batch); i += 1000 {
			if _, err := s.SendBatch(ctx, batch[i:min(i+1000, len(batch))]); err != nil {
				t.Fatal(err)
			}
		}
		r, _ := c.NewReceiver("jobs", nil)
		locked, err := r.Receive(ctx, 1) // #1 stays locked
		if err != nil || len(locked) != 1 {
			t.Fatalf("Receive = %v, %v", locked, err)
		}
		if n, err := c.DeleteMessages(ctx, "jobs", &sluice.DeleteOptions{SequenceNumbers: []int64{1, 2, 3}}); err != nil || n != 2 {
			t.Fatalf("DeleteMessages(1, 2, 3) = %d, %v; want 2", n, err)
		}
		if n, err := c.DeleteMessages(ctx, "JOBS", &sluice.DeleteOptions{Max: 7}); err != nil || n != 7 {
			t.Fatalf("DeleteMessages(the oldest 7) = %d, %v", n, err)
		}
		page, _ := r.Browse(ctx, 2, nil)
		if got := seqsOf(page.Messages); !slices.Equal(got, []int64{1, 11}) {
			t.Errorf("after the deletes the first messages are %v, want [1 11]", got)
		}
		for _, bad := range []*sluice.DeleteOptions{nil, {}, {Max: -1}, {Max: 1001}, {SequenceNumbers: []int64{0}},
			{SequenceNumbers: []int64{5}, Max: 1}} {
			if _, err := c.DeleteMessages(ctx, "jobs", bad); !errors.Is(err, sluice.ErrInvalidArgument) {
				t.Errorf("DeleteMessages(%+v) = %v, want ErrInvalidArgument", bad, err)
			}
		}
		if _, err := c.DeleteMessages(ctx, "nothing", &sluice.DeleteOptions{Max: 1}); !errors.Is(err, sluice.ErrEntityNotFound) {
			t.Errorf("DeleteMessages of a missing queue = %v", err)
		}
		if n, err := c.PurgeMessages(ctx, "jobs", time.Time{}); err != nil || n != 2500-10 {
			t.Fatalf("PurgeMessages = %d, %v; want %d", n, err, 2500-10)
		}
		st, err := c.GetQueueStats(ctx, "jobs")
		if err != nil || st.Active != 0 || st.InFlight != 1 {
			t.Errorf("after the purge: %+v, %v; want the locked message alone", st, err)
		}
		if err := r.Complete(ctx, locked[0]); err != nil {
			t.Errorf("completing the locked message after the purge: %v", err)
		}
	})
}
