package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/sluiceprom"
)

// consumerLagView is a consumer's lag in a namespace as --json prints
// it: now, with processors (the live ones serving it), or with
// --history over time (interval and samples, the API's
// ConsumerLagHistory).
type consumerLagView struct {
	Group      string          `json:"group"`
	Consumer   string          `json:"consumer"`
	Namespace  string          `json:"namespace"`
	Lag        *int64          `json:"lag,omitempty"`
	Processors *int            `json:"processors,omitempty"`
	Interval   string          `json:"interval,omitempty"`
	Samples    []lagSampleView `json:"samples,omitempty"`
}

// subscriptionLagHistoryView is a stream subscription's lag as --json
// prints it: now, or with --history over time (the API's
// SubscriptionLagHistory).
type subscriptionLagHistoryView struct {
	ID        string          `json:"id"`
	Consumer  string          `json:"consumer"`
	Namespace string          `json:"namespace"`
	Key       string          `json:"key,omitempty"`
	Lag       *int64          `json:"lag,omitempty"`
	Interval  string          `json:"interval,omitempty"`
	Samples   []lagSampleView `json:"samples,omitempty"`
}

type lagSampleView struct {
	At  time.Time `json:"at"`
	Lag int64     `json:"lag"`
}

func lagSampleViews(samples []client.LagSample) []lagSampleView {
	out := make([]lagSampleView, len(samples))
	for i, s := range samples {
		out[i] = lagSampleView{At: s.At.UTC(), Lag: s.Lag}
	}
	return out
}

func opStreamLag() *op {
	var (
		history      bool
		subscription string
		max          int
	)
	return &op{name: "stream lag", args: "[CONSUMER]", maxArgs: 1, streams: true,
		about: "Prints the stream lag of each consumer in each namespace (the records past its subscriptions'\n" +
			"stored positions there, over their partitions), the group and the live processors serving it,\n" +
			"lagging most first; of CONSUMER only when given, or of one subscription with --subscription.\n" +
			"--history prints what the server sampled over the last hour, oldest first: a column per\n" +
			"consumer and namespace (the --max lagging most now), or the subscription's lag.",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&history, "history", false, "print the lag over the last hour, oldest first (through a server)")
			fs.StringVar(&subscription, "subscription", "", "the lag of this stream subscription (its id)")
			fs.IntVar(&max, "max", 10, "with --history, at most this many consumers in namespaces (1 to 1000)")
		},
		check: func(args []string) error {
			switch {
			case subscription != "" && len(args) > 0:
				return errors.New("--subscription names the subscription: give no CONSUMER")
			case max < 1 || max > 1000:
				return errors.New("--max: want 1 to 1000")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			consumer := ""
			if len(args) > 0 {
				consumer = args[0]
			}
			switch {
			case history && subscription != "":
				return printSubscriptionLagHistory(ctx, e, subscription)
			case history:
				return printConsumerLagHistory(ctx, e, consumer, max)
			case subscription != "":
				return printSubscriptionLag(ctx, e, subscription)
			}
			return printConsumerLag(ctx, e, consumer)
		}}
}

// printConsumerLag prints each consumer's lag in each namespace now,
// from the cluster's status, lagging most first.
func printConsumerLag(ctx context.Context, e *env, consumer string) error {
	st, err := e.api.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	lags := slices.DeleteFunc(sluiceprom.ConsumerLags(st), func(l sluiceprom.ConsumerLag) bool {
		return consumer != "" && sluice.CanonicalName(l.Consumer) != sluice.CanonicalName(consumer)
	})
	slices.SortFunc(lags, func(a, b sluiceprom.ConsumerLag) int {
		return cmp.Or(cmp.Compare(b.Lag, a.Lag), cmp.Compare(a.Consumer, b.Consumer), cmp.Compare(a.Namespace, b.Namespace))
	})
	if e.json {
		for _, l := range lags {
			if err := e.emit(consumerLagView{Group: l.Group, Consumer: l.Consumer, Namespace: l.Namespace, Lag: &l.Lag,
				Processors: &l.Processors}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "CONSUMER\tNAMESPACE\tGROUP\tLAG\tPROCESSORS")
	for _, l := range lags {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", l.Consumer, l.Namespace, groupName(l.Group), l.Lag, l.Processors)
	}
	return tw.Flush()
}

// printSubscriptionLag prints a subscription's lag now, summed over its
// partitions.
func printSubscriptionLag(ctx context.Context, e *env, id string) error {
	sub, err := e.api.GetStreamSubscription(ctx, id)
	if err != nil {
		return err
	}
	st, err := e.api.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	var lag int64
	for _, p := range st.Partitions {
		for _, s := range p.Subscriptions {
			if s.ID == sub.ID {
				lag += s.Lag
			}
		}
	}
	if e.json {
		return e.emit(subscriptionLagHistoryView{ID: sub.ID, Consumer: sub.Consumer, Namespace: sub.Stream.Namespace, Key: sub.Stream.Key,
			Lag: &lag})
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "SUBSCRIPTION\tCONSUMER\tSTREAM\tLAG")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", sub.ID, sub.Consumer, streamOf(sluice.SubscriptionLag{Namespace: sub.Stream.Namespace,
		Key: sub.Stream.Key}), lag)
	return tw.Flush()
}

// printConsumerLagHistory prints the consumers' lag over the last hour:
// a row per sample, a column per consumer and namespace.
func printConsumerLagHistory(ctx context.Context, e *env, consumer string, max int) error {
	interval, series, err := e.api.consumerLagHistory(ctx, consumer, max)
	if err != nil {
		return err
	}
	if e.json {
		for _, h := range series {
			if err := e.emit(consumerLagView{Group: h.Group, Consumer: h.Consumer, Namespace: h.Namespace,
				Interval: formatDuration(interval), Samples: lagSampleViews(h.Samples)}); err != nil {
				return err
			}
		}
		return nil
	}
	// The series' samples share their times (one sample takes every
	// series'), but a series may start later or end earlier.
	byTime := map[time.Time][]string{}
	var times []time.Time
	for i, h := range series {
		for _, s := range h.Samples {
			row, ok := byTime[s.At]
			if !ok {
				row = slices.Repeat([]string{"-"}, len(series))
				times = append(times, s.At)
			}
			row[i] = fmt.Sprint(s.Lag)
			byTime[s.At] = row
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	tw := table(e.stdout)
	fmt.Fprint(tw, "AT")
	for _, h := range series {
		fmt.Fprintf(tw, "\t%s·%s", h.Consumer, h.Namespace)
	}
	fmt.Fprintf(tw, "\t(lag; a sample every %s)\n", interval)
	for _, at := range times {
		fmt.Fprint(tw, when(at))
		for _, v := range byTime[at] {
			fmt.Fprint(tw, "\t", v)
		}
		fmt.Fprint(tw, "\t\n")
	}
	return tw.Flush()
}

// printSubscriptionLagHistory prints a subscription's lag over the last
// hour.
func printSubscriptionLagHistory(ctx context.Context, e *env, id string) error {
	interval, h, err := e.api.subscriptionLagHistory(ctx, id)
	if err != nil {
		return err
	}
	if e.json {
		return e.emit(subscriptionLagHistoryView{ID: h.ID, Consumer: h.Consumer, Namespace: h.Namespace, Key: h.Key,
			Interval: formatDuration(interval), Samples: lagSampleViews(h.Samples)})
	}
	fmt.Fprintf(e.stdout, "subscription %s of %s to %s\n", h.ID, h.Consumer,
		streamOf(sluice.SubscriptionLag{Namespace: h.Namespace, Key: h.Key}))
	tw := table(e.stdout)
	fmt.Fprintf(tw, "AT\tLAG\t(a sample every %s)\n", interval)
	for _, s := range h.Samples {
		fmt.Fprintf(tw, "%s\t%d\t\n", when(s.At), s.Lag)
	}
	return tw.Flush()
}
