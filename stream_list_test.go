package sluice_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// ListStreamSubscriptions lists a stream's subscriptions and its
// namespace's, merged, by consumer (in lower case) then id, a page at a
// time, and filters them by consumer or prefix, case-insensitively;
// StreamSubscriptions lists them all in that order.
func TestListStreamSubscriptions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		ns := "list-" + randHex(4)
		id := sluice.StreamID{Namespace: ns, Key: "k"}
		// The namespace subscriptions of Beta and zed, stored as their
		// processor starts.
		p := c.NewStreamProcessor(nil)
		noop := func(context.Context, *sluice.StreamEvent) error { return nil }
		for _, consumer := range []string{"Beta", "zed"} {
			if err := p.Handle(consumer, noop, &sluice.ConsumerOptions{Namespace: ns}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for _, consumer := range []string{"alpha", "beta", "alpha", "gamma", "Alpha-2"} {
			if _, err := c.Subscribe(ctx, id, consumer, sluice.FromNow()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Subscribe(ctx, sluice.StreamID{Namespace: ns, Key: "other"}, "alpha", sluice.FromNow()); err != nil {
			t.Fatal(err)
		}
		all, err := c.StreamSubscriptions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var consumers []string
		for i, s := range all {
			consumers = append(consumers, s.Consumer)
			if s.Stream.Namespace != ns || s.Stream.Key != "k" && s.Stream.Key != "" {
				t.Errorf("listed another stream's subscription %+v", s)
			}
			if i > 0 && order(all[i-1], s) >= 0 {
				t.Errorf("%s (%s) listed after %s (%s)", s.Consumer, s.ID, all[i-1].Consumer, all[i-1].ID)
			}
		}
		// A stream subscription's id is hex, before a namespace's "ns/...".
		if want := []string{"alpha", "alpha", "Alpha-2", "beta", "Beta", "gamma", "zed"}; !slices.Equal(consumers, want) {
			t.Fatalf("StreamSubscriptions lists %v, want %v", consumers, want)
		}
		var paged []sluice.StreamSubscription
		opts := sluice.StreamSubscriptionListOptions{Max: 2}
		for {
			page, err := c.ListStreamSubscriptions(ctx, id, &opts)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, page...)
			if len(page) < opts.Max {
				break
			}
			opts.AfterConsumer, opts.AfterID = strings.ToUpper(page[len(page)-1].Consumer), page[len(page)-1].ID
		}
		if !slices.EqualFunc(paged, all, func(a, b sluice.StreamSubscription) bool { return a.ID == b.ID }) {
			t.Fatalf("pages of 2 list %+v, want %+v", paged, all)
		}
		for _, f := range []struct {
			opts sluice.StreamSubscriptionListOptions
			want []string
		}{
			{sluice.StreamSubscriptionListOptions{Consumer: "ALPHA"}, []string{"alpha", "alpha"}},
			{sluice.StreamSubscriptionListOptions{ConsumerPrefix: "al"}, []string{"alpha", "alpha", "Alpha-2"}},
			{sluice.StreamSubscriptionListOptions{ConsumerPrefix: "B"}, []string{"beta", "Beta"}},
			{sluice.StreamSubscriptionListOptions{Consumer: "zed"}, []string{"zed"}},
			{sluice.StreamSubscriptionListOptions{ConsumerPrefix: "x"}, nil},
			{sluice.StreamSubscriptionListOptions{Max: 3}, []string{"alpha", "alpha", "Alpha-2"}},
			{sluice.StreamSubscriptionListOptions{AfterConsumer: "beta", AfterID: "~"}, []string{"gamma", "zed"}},
		} {
			subs, err := c.ListStreamSubscriptions(ctx, id, &f.opts)
			var got []string
			for _, s := range subs {
				got = append(got, s.Consumer)
			}
			if err != nil || !slices.Equal(got, f.want) {
				t.Errorf("ListStreamSubscriptions(%+v) = %v, %v; want %v", f.opts, got, err, f.want)
			}
		}
		for _, bad := range []struct {
			id     sluice.StreamID
			opts   sluice.StreamSubscriptionListOptions
			target error
		}{
			{id, sluice.StreamSubscriptionListOptions{Consumer: "a", ConsumerPrefix: "a"}, sluice.ErrInvalidArgument},
			{id, sluice.StreamSubscriptionListOptions{Max: -1}, sluice.ErrInvalidArgument},
			{id, sluice.StreamSubscriptionListOptions{Max: 100000}, sluice.ErrInvalidArgument},
			{id, sluice.StreamSubscriptionListOptions{Consumer: "bad name!"}, sluice.ErrInvalidName},
			{sluice.StreamID{Namespace: "bad name!", Key: "k"}, sluice.StreamSubscriptionListOptions{}, sluice.ErrInvalidName},
		} {
			_, err := c.ListStreamSubscriptions(ctx, bad.id, &bad.opts)
			wantErr(t, "ListStreamSubscriptions with "+strings.TrimSpace(bad.id.Namespace+" "+bad.opts.Consumer), err, bad.target)
		}
	})
}

// order compares subscriptions as listings order them.
func order(a, b sluice.StreamSubscription) int {
	return cmp.Or(strings.Compare(strings.ToLower(a.Consumer), strings.ToLower(b.Consumer)), strings.Compare(a.ID, b.ID))
}
