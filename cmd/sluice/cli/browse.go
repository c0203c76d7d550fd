package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// filterFlags are peek's search flags: a sluice.MessageFilter.
type filterFlags struct {
	states                            string
	messageID, correlationID, subject string
	session, reason                   string
	reasonSet                         bool
	properties                        repeated
	filter                            sluice.MessageFilter
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.states, "state", "", "only messages in these states, comma-separated: active, locked, scheduled, deferred, expired")
	fs.StringVar(&f.messageID, "message-id", "", "only the messages with this message id")
	fs.StringVar(&f.correlationID, "correlation-id", "", "only the messages with this correlation id")
	fs.StringVar(&f.subject, "subject", "", "only the messages with this subject")
	fs.StringVar(&f.session, "session", "", "only the messages of this session")
	fs.Func("reason", "with --dlq, only the dead letters dead-lettered for this reason (\"\" for those without one)", func(s string) error {
		f.reason, f.reasonSet = s, true
		return nil
	})
	fs.Var(&f.properties, "property", "only the messages with this application property key=value (repeatable: all must match)")
}

// stateNames are the states a filter names: the API's names, and those
// peek prints (ready, leased).
var stateNames = map[string]sluice.MessageState{
	"active": sluice.StateActive, "locked": sluice.StateLocked, "scheduled": sluice.StateScheduled,
	"deferred": sluice.StateDeferred, "expired": sluice.StateExpired,
	"ready": sluice.StateActive, "leased": sluice.StateLocked,
}

// check builds the filter; set says whether any flag asked for one.
func (f *filterFlags) check(dlq bool) (set bool, err error) {
	f.filter = sluice.MessageFilter{MessageID: f.messageID, CorrelationID: f.correlationID, Subject: f.subject, SessionID: f.session}
	if f.filter.Properties, err = keyValues("property", f.properties); err != nil {
		return false, err
	}
	for _, s := range strings.Split(f.states, ",") {
		if s = strings.TrimSpace(strings.ToLower(s)); s == "" {
			continue
		}
		st, ok := stateNames[s]
		if !ok {
			return false, fmt.Errorf("--state %q: want active, locked, scheduled, deferred or expired", s)
		}
		f.filter.States = append(f.filter.States, st)
	}
	switch {
	case dlq && len(f.filter.States) > 0:
		return false, errors.New("--state and --dlq exclude each other: dead letters have no state")
	case !dlq && f.reasonSet:
		return false, errors.New("--reason needs --dlq: only dead letters have a reason")
	}
	if f.reasonSet {
		f.filter.DeadLetterReason = &f.reason
	}
	return f.states != "" || f.messageID != "" || f.correlationID != "" || f.subject != "" || f.session != "" ||
		f.reasonSet || len(f.properties) > 0, nil
}

// search returns up to limit messages of an entity (or its dead-letter
// queue) that match f, from the sequence number from on, in as many
// bounded pages of the server's (or the database's) search as it takes.
func search(ctx context.Context, a sluiceAPI, entity string, dlq bool, from int64, limit int, f sluice.MessageFilter) ([]*sluice.ReceivedMessage, error) {
	r, err := a.MessageReceiver(entity, &sluice.ReceiverOptions{SubQueue: subQueue(dlq)})
	if err != nil {
		return nil, err
	}
	var out []*sluice.ReceivedMessage
	opts := &sluice.BrowseOptions{FromSequenceNumber: from, Filter: f}
	for len(out) < limit {
		page, err := r.Browse(ctx, min(limit-len(out), sluice.MaxPeek), opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Messages...)
		if page.Next == 0 {
			break
		}
		opts.FromSequenceNumber = page.Next
	}
	return out, nil
}

// beforeValue is a --before flag: a time, or a duration ago.
type beforeValue struct{ t time.Time }

func (b *beforeValue) String() string {
	if b.t.IsZero() {
		return ""
	}
	return b.t.Format(time.RFC3339)
}

func (b *beforeValue) Set(s string) error {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		b.t = t
		return nil
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a time (RFC 3339, 2026-12-05T10:00:00Z) or how long ago (90m)")
	}
	b.t = time.Now().Add(-d)
	return nil
}

const beforeHelp = "only messages enqueued before this time (RFC 3339), or this long ago (90m)"

func opMessageDelete() *op {
	var seqs []int64
	var oldest int
	var before beforeValue
	return &op{name: "message delete", args: "ENTITY [SEQ...]", minArgs: 1, maxArgs: -1,
		about: "Deletes messages of a queue or subscription without receiving them, in one transaction: those whose\n" +
			"sequence numbers are given, or the --oldest. A message a receiver's lock holds stays.",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&oldest, "oldest", 0, "delete this many of the oldest messages, instead of numbered ones (1 to 1000)")
			fs.Var(&before, "before", beforeHelp+", with --oldest")
		},
		confirm: func(args []string) string {
			if len(seqs) > 0 {
				return fmt.Sprintf("Delete %d message(s) of %s", len(seqs), args[0])
			}
			if !before.t.IsZero() {
				return fmt.Sprintf("Delete the %d oldest messages of %s enqueued before %s", oldest, args[0], before.t.Format(time.RFC3339))
			}
			return fmt.Sprintf("Delete the %d oldest messages of %s", oldest, args[0])
		},
		check: func(args []string) (err error) {
			if seqs, err = sequenceNumbers(args[1:]); err != nil {
				return err
			}
			switch {
			case len(seqs) > 0 && (oldest != 0 || !before.t.IsZero()):
				return errors.New("sequence numbers exclude --oldest and --before")
			case len(seqs) == 0 && oldest == 0:
				return errors.New("name the messages: sequence numbers, or --oldest N")
			case len(seqs) == 0 && (oldest < 1 || oldest > deleteBatch):
				return fmt.Errorf("--oldest %d: want 1 to %d", oldest, deleteBatch)
			case len(seqs) > deleteBatch:
				return fmt.Errorf("%d sequence numbers: at most %d at a time", len(seqs), deleteBatch)
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			n, err := e.api.DeleteMessages(ctx, args[0], &sluice.DeleteOptions{SequenceNumbers: seqs, Max: oldest, EnqueuedBefore: before.t})
			if err != nil {
				return err
			}
			return e.printCount("deleted", n)
		}}
}

func opMessagePurge() *op {
	var before beforeValue
	return &op{name: "message purge", args: "ENTITY", minArgs: 1, maxArgs: 1,
		about: "Deletes every message of a queue or subscription that no receiver's lock holds, oldest first, in\n" +
			"transactions of 1,000. Dead letters stay (dlq purge deletes those).",
		flags: func(fs *flag.FlagSet) { fs.Var(&before, "before", beforeHelp) },
		confirm: func(args []string) string {
			if !before.t.IsZero() {
				return fmt.Sprintf("Delete every message of %s enqueued before %s", args[0], before.t.Format(time.RFC3339))
			}
			return fmt.Sprintf("Delete every message of %s", args[0])
		},
		run: func(ctx context.Context, e *env, args []string) error {
			n, err := e.api.PurgeMessages(ctx, args[0], before.t)
			if err != nil {
				return err
			}
			return e.printCount("purged", n)
		}}
}

func opDLQReasons() *op {
	return &op{name: "dlq reasons", args: "ENTITY", minArgs: 1, maxArgs: 1,
		about: "Counts the dead letters of a queue or subscription by reason, the most first.",
		run: func(ctx context.Context, e *env, args []string) error {
			byReason, err := e.api.DeadLetterReasons(ctx, args[0])
			if err != nil {
				return err
			}
			rows := reasonRows(byReason)
			if e.json {
				for _, r := range rows {
					if err := e.emit(r); err != nil {
						return err
					}
				}
				return nil
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "COUNT\tREASON")
			for _, r := range rows {
				fmt.Fprintf(tw, "%d\t%s\n", r.Count, orDash(r.Reason))
			}
			return tw.Flush()
		}}
}

// reasonRow is one reason's count, as the API's JSON names them.
type reasonRow struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// reasonRows orders reasons as the API does: the most first.
func reasonRows(byReason map[string]int64) []reasonRow {
	rows := make([]reasonRow, 0, len(byReason))
	for r, n := range byReason {
		rows = append(rows, reasonRow{r, n})
	}
	slices.SortFunc(rows, func(a, b reasonRow) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return rows
}
