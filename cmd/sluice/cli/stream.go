package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// eventView is a published or tailed event as --json prints it.
type eventView struct {
	Namespace  string            `json:"namespace"`
	Key        string            `json:"key"`
	Partition  int32             `json:"partition"`
	Position   int64             `json:"position"`
	AppendedAt time.Time         `json:"appendedAt,omitzero"`
	Properties map[string]string `json:"properties,omitempty"`
	body
}

func opStreamPublish() *op {
	var bf bodyFlags
	var props repeated
	var p map[string]string
	return &op{name: "stream publish", args: "NAMESPACE KEY [BODY...]", minArgs: 2, maxArgs: -1, streams: true,
		about: "Publishes events to a stream atomically, one for each BODY argument, then one for each --file;\n" +
			"with neither, standard input is the body of one. Prints their positions in the stream's partition.",
		flags: func(fs *flag.FlagSet) {
			bf.register(fs, "event")
			fs.Var(&props, "property", "property key=value of every event (repeatable)")
		},
		check: func([]string) error {
			var err error
			p, err = keyValues("property", props)
			return err
		},
		run: func(ctx context.Context, e *env, args []string) error {
			bodies, err := bf.bodies(args[2:], e.stdin)
			if err != nil {
				return err
			}
			events := make([]sluice.Event, len(bodies))
			for i, b := range bodies {
				events[i] = sluice.Event{Body: b, Properties: p}
			}
			id := sluice.StreamID{Namespace: args[0], Key: args[1]}
			part, positions, err := e.api.publish(ctx, id, events...)
			if err != nil {
				return err
			}
			for _, pos := range positions {
				if e.json {
					err = e.emit(eventView{Namespace: id.Namespace, Key: id.Key, Partition: part, Position: pos})
				} else {
					_, err = fmt.Fprintln(e.stdout, pos)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}}
}

// errTailDone ends a tail that printed its --count.
var errTailDone = errors.New("tail done")

func opStreamTail() *op {
	var count int
	var forD time.Duration
	return &op{name: "stream tail", args: "NAMESPACE [KEY]", minArgs: 1, maxArgs: 2, streams: true,
		about: "Prints each event published to a namespace, or to one stream of it, from now on, until Ctrl-C,\n" +
			"--count events or --for a while. It only reads: no subscription is stored.",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&count, "count", 0, "stop after this many events (0: no limit)")
			fs.Var((*durationValue)(&forD), "for", "stop after this long (0: no limit)")
		},
		check: func([]string) error {
			if count < 0 || forD < 0 {
				return errors.New("--count and --for must not be negative")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if forD > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, forD)
				defer cancel()
			}
			namespace, key := args[0], ""
			what := "namespace " + namespace
			if len(args) == 2 {
				key, what = args[1], "stream "+sluice.StreamID{Namespace: namespace, Key: args[1]}.String()
			}
			opts := &sluice.TailOptions{
				Started: func(partitions int) {
					fmt.Fprintf(e.stderr, "sluice stream tail: following %s on %d partitions from now; Ctrl-C stops\n", what, partitions)
				},
				Trimmed: func(partition int32, from, to int64) {
					fmt.Fprintf(e.stderr, "sluice stream tail: partition %d: positions %d to %d were deleted by retention before they were read\n",
						partition, from, to)
				},
			}
			printed := 0
			err := e.api.TailStream(ctx, namespace, key, func(ev *sluice.StreamEvent) error {
				if err := e.printEvent(ev); err != nil {
					return err
				}
				if printed++; count > 0 && printed >= count {
					return errTailDone
				}
				return nil
			}, opts)
			if errors.Is(err, errTailDone) || ctx.Err() != nil {
				return nil // asked to stop
			}
			return err
		}}
}

func (e *env) printEvent(ev *sluice.StreamEvent) error {
	if e.json {
		return e.emit(eventView{Namespace: ev.Namespace, Key: ev.Key, Partition: ev.Partition, Position: ev.Position,
			AppendedAt: ev.AppendedAt.UTC(), Properties: ev.Properties, body: bodyOf(ev.Body)})
	}
	var props strings.Builder
	for _, k := range slices.Sorted(maps.Keys(ev.Properties)) {
		fmt.Fprintf(&props, " %s=%s", k, ev.Properties[k])
	}
	_, err := fmt.Fprintf(e.stdout, "[%d:%d] %s/%s %s%s: %s\n", ev.Partition, ev.Position, ev.Namespace, ev.Key, when(ev.AppendedAt),
		props.String(), bodyText(ev.Body))
	return err
}
