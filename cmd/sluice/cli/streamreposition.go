package cli

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// repositionView is a reposition as --json prints it.
type repositionView struct {
	Subscription string          `json:"subscription,omitempty"`
	To           string          `json:"to"`
	By           string          `json:"by,omitempty"`
	At           time.Time       `json:"at,omitzero"`
	Moves        []partitionMove `json:"moves"`
}

type partitionMove struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

func viewReposition(sub string, r *sluice.StreamReposition) repositionView {
	v := repositionView{Subscription: sub, To: r.To, By: r.By, At: r.At.UTC(), Moves: []partitionMove{}}
	for _, p := range slices.Sorted(maps.Keys(r.ToPositions)) {
		v.Moves = append(v.Moves, partitionMove{p, r.FromPositions[p], r.ToPositions[p]})
	}
	return v
}

// describeReposition is a reposition on one line.
func describeReposition(r *sluice.StreamReposition) string {
	v := viewReposition("", r)
	s := fmt.Sprintf("to %s at %s", v.To, when(r.At))
	if v.By != "" {
		s += " by " + v.By
	}
	for _, m := range v.Moves {
		s += fmt.Sprintf(", partition %d: %d -> %d", m.Partition, m.From, m.To)
	}
	return s
}

func opStreamReposition() *op {
	var to string
	var partition int
	var target sluice.StartPosition
	return &op{name: "stream reposition", args: "SUBSCRIPTION", minArgs: 1, maxArgs: 1, streams: true,
		about: "Moves a stream subscription, explicit or a consumer's to a namespace, to --to: the oldest event\n" +
			"retention kept, the head (past every event published so far), or a position (the next event\n" +
			"delivered is the first of its streams at or after it; --partition names the partition of a\n" +
			"namespace subscription). Clears its fault, which is how a subscription leaves a retention gap,\n" +
			"and records the move on the subscription. Prints the reposition.",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&to, "to", "", "where to: oldest, head, or a position (required)")
			fs.IntVar(&partition, "partition", -1, "for a position of a namespace subscription: the partition")
		},
		check: func([]string) error {
			switch to {
			case "oldest":
				target = sluice.FromBeginning()
			case "head":
				target = sluice.FromNow()
			default:
				pos, err := strconv.ParseInt(to, 10, 64)
				if err != nil || pos < 1 {
					return fmt.Errorf("--to %q: want oldest, head or a position from 1", to)
				}
				target = sluice.FromPosition(pos)
			}
			if partition != -1 && to != "" && target.Kind() != "at" {
				return fmt.Errorf("--partition goes with --to POSITION")
			}
			if partition < -1 || partition > 1<<20 {
				return fmt.Errorf("--partition %d: want a partition number", partition)
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			opts := &sluice.RepositionOptions{By: "sluice CLI"}
			if partition >= 0 {
				opts.Partition = int32(partition)
			}
			r, err := e.api.RepositionStreamSubscription(ctx, args[0], target, opts)
			if err != nil {
				return err
			}
			if e.json {
				return e.emit(viewReposition(args[0], &r))
			}
			_, err = fmt.Fprintf(e.stdout, "repositioned %s %s\n", args[0], describeReposition(&r))
			return err
		}}
}
