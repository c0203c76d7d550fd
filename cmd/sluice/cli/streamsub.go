package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// streamSubscriptionView is a stream subscription as --json prints it.
type streamSubscriptionView struct {
	ID        string    `json:"id"`
	Consumer  string    `json:"consumer"`
	Namespace string    `json:"namespace"`
	Key       string    `json:"key,omitempty"`
	Partition int32     `json:"partition"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	Fault     string    `json:"fault,omitempty"`
	FaultedAt time.Time `json:"faultedAt,omitzero"`
	// Repositions counts its repositions; LastReposition is the last.
	Repositions    int64           `json:"repositions,omitempty"`
	LastReposition *repositionView `json:"lastReposition,omitempty"`
}

// parkedView is a parked event as --json prints it.
type parkedView struct {
	eventView
	Attempts int       `json:"attempts"`
	Error    string    `json:"error"`
	ParkedAt time.Time `json:"parkedAt,omitzero"`
}

func opStreamSubscribe() *op {
	var from string
	var start sluice.StartPosition
	return &op{name: "stream subscribe", args: "NAMESPACE KEY CONSUMER", minArgs: 3, maxArgs: 3, streams: true,
		about: "Subscribes a consumer to one stream, from --from on: the consumer's processors deliver its events\n" +
			"until the subscription is deleted. Prints the subscription.",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&from, "from", "now", "where the subscription starts: now, beginning, or a position")
		},
		check: func([]string) error {
			switch from {
			case "now":
				start = sluice.FromNow()
			case "beginning":
				start = sluice.FromBeginning()
			default:
				pos, err := strconv.ParseInt(from, 10, 64)
				if err != nil || pos < 0 {
					return fmt.Errorf("--from %q: want now, beginning or a position", from)
				}
				start = sluice.FromPosition(pos)
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			sub, err := e.api.Subscribe(ctx, sluice.StreamID{Namespace: args[0], Key: args[1]}, args[2], start)
			if err != nil {
				return err
			}
			return e.printSubscriptions([]sluice.StreamSubscription{sub})
		}}
}

func opStreamSubscriptions() *op {
	return &op{name: "stream subscriptions", args: "NAMESPACE KEY", minArgs: 2, maxArgs: 2, streams: true,
		about: "Lists the subscriptions that receive a stream's events: those to the stream, and those of consumers\n" +
			"to its whole namespace. A faulted one shows why it stopped.",
		run: func(ctx context.Context, e *env, args []string) error {
			subs, err := e.api.StreamSubscriptions(ctx, sluice.StreamID{Namespace: args[0], Key: args[1]})
			if err != nil {
				return err
			}
			return e.printSubscriptions(subs)
		}}
}

func opStreamSubscription() *op {
	return &op{name: "stream subscription", args: "SUBSCRIPTION", minArgs: 1, maxArgs: 1, streams: true,
		about: "Prints a stream subscription, with its fault if it stopped.",
		run: func(ctx context.Context, e *env, args []string) error {
			sub, err := e.api.GetStreamSubscription(ctx, args[0])
			if err != nil {
				return err
			}
			return e.printSubscriptions([]sluice.StreamSubscription{sub})
		}}
}

func opStreamUnsubscribe() *op {
	return &op{name: "stream unsubscribe", args: "SUBSCRIPTION", minArgs: 1, maxArgs: 1, streams: true,
		about: "Deletes a stream subscription, with its progress and its parked events.",
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.Unsubscribe(ctx, args[0]); err != nil {
				return err
			}
			return e.printDeleted("stream subscription", args[0])
		}}
}

func opStreamClearFault() *op {
	return &op{name: "stream clear-fault", args: "SUBSCRIPTION", minArgs: 1, maxArgs: 1, streams: true,
		about: "Resumes a faulted subscription: the event that faulted it is delivered again, then the ones after it.",
		run: func(ctx context.Context, e *env, args []string) error {
			if err := e.api.ClearFault(ctx, args[0]); err != nil {
				return err
			}
			if e.json {
				return e.emit(map[string]string{"cleared": args[0]})
			}
			_, err := fmt.Fprintf(e.stdout, "cleared %s\n", args[0])
			return err
		}}
}

func opStreamParked() *op {
	var limit int
	return &op{name: "stream parked", args: "SUBSCRIPTION", minArgs: 1, maxArgs: 1, streams: true,
		about: "Prints a subscription's parked events, oldest first: the events whose deliveries all failed,\n" +
			"with their attempts and last error. A processor of the consumer replays them (Replay).",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "max", 100, "print up to this many (1 to 1000)")
		},
		check: func([]string) error {
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--max %d: want 1 to 1000", limit)
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			parked, err := e.api.ParkedEvents(ctx, args[0], limit)
			if err != nil {
				return err
			}
			for _, p := range parked {
				if e.json {
					err = e.emit(parkedView{eventView: eventView{Namespace: p.Namespace, Key: p.Key, Partition: p.Partition,
						Position: p.Position, AppendedAt: p.AppendedAt.UTC(), Properties: p.Properties, body: bodyOf(p.Body)},
						Attempts: p.Attempts, Error: p.Error, ParkedAt: p.ParkedAt.UTC()})
				} else {
					err = e.printEvent(&p.StreamEvent)
					if err == nil {
						_, err = fmt.Fprintf(e.stdout, "  parked %s after %d attempts: %s\n", when(p.ParkedAt), p.Attempts, p.Error)
					}
				}
				if err != nil {
					return err
				}
			}
			return nil
		}}
}

// printSubscriptions prints stream subscriptions: a table, or a line of
// JSON each.
func (e *env) printSubscriptions(subs []sluice.StreamSubscription) error {
	if e.json {
		for _, s := range subs {
			v := streamSubscriptionView{ID: s.ID, Consumer: s.Consumer, Namespace: s.Stream.Namespace, Key: s.Stream.Key,
				Partition: s.Partition, CreatedAt: s.CreatedAt.UTC(), Fault: s.Fault, FaultedAt: s.FaultedAt.UTC(), Repositions: s.Repositions}
			if s.LastReposition != nil {
				r := viewReposition("", s.LastReposition)
				v.LastReposition = &r
			}
			if err := e.emit(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "ID\tCONSUMER\tSTREAM\tPARTITION\tCREATED\tFAULT\tLAST REPOSITION")
	for _, s := range subs {
		stream, partition := s.Stream.Namespace+"/*", "all"
		if s.Stream.Key != "" {
			stream, partition = s.Stream.String(), strconv.Itoa(int(s.Partition))
		}
		fault := "-"
		if s.Fault != "" {
			fault = when(s.FaultedAt) + " " + s.Fault
		}
		last := "-"
		if s.LastReposition != nil {
			last = describeReposition(s.LastReposition)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Consumer, stream, partition, when(s.CreatedAt), fault, last)
	}
	return tw.Flush()
}
