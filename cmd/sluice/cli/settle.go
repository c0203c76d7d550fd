package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// lockFlags say whose locks a settling command names: the entity's (or
// its dead-letter queue's), or a session's, whose messages are locked by
// the session lock that receive printed.
type lockFlags struct {
	dlq                   bool
	session, sessionToken string
	noDLQ                 bool // the command settles nothing of a dead-letter queue
}

func (f *lockFlags) register(fs *flag.FlagSet) {
	if !f.noDLQ {
		fs.BoolVar(&f.dlq, "dlq", false, "the messages were received from the entity's dead-letter queue")
	}
	fs.StringVar(&f.session, "session", "", "the messages are of this session, held by --session-token")
	fs.StringVar(&f.sessionToken, "session-token", "", "the session lock's token, as receive --session --no-complete printed it")
}

func (f *lockFlags) check() error {
	switch {
	case (f.session == "") != (f.sessionToken == ""):
		return errors.New("--session and --session-token go together: a session's messages are settled under its lock")
	case f.session != "" && f.dlq:
		return errors.New("--session and --dlq exclude each other: a dead-letter queue has no sessions")
	}
	return checkSessionToken(f.sessionToken)
}

// hexToken matches n hex digits.
func hexToken(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// checkTokens refuses arguments that are not lock tokens (32 hex
// digits, as receive prints them).
func checkTokens(tokens []string) error {
	for _, t := range tokens {
		if !hexToken(t, 32) {
			return fmt.Errorf("lock token %q: want the 32 hex digits receive --no-complete printed", t)
		}
	}
	return nil
}

// checkSessionToken refuses a session lock token that is not 16 hex
// digits ("" passes: none given).
func checkSessionToken(t string) error {
	if t != "" && !hexToken(t, 16) {
		return fmt.Errorf("--session-token %q: want the 16 hex digits receive --session printed", t)
	}
	return nil
}

// source is what settles the messages: a receiver of the entity, or the
// session resumed under its lock.
func (f *lockFlags) source(e *env, entity string) (sluice.MessageSource, error) {
	if f.session != "" {
		return e.api.ResumeMessageSession(entity, f.session, f.sessionToken, nil)
	}
	return e.api.MessageReceiver(entity, &sluice.ReceiverOptions{SubQueue: subQueue(f.dlq)})
}

// tokenSeq is the sequence number a lock token names (its first 16 hex
// digits), 0 when it is not a lock token.
func tokenSeq(token string) int64 {
	if len(token) != 32 {
		return 0
	}
	n, err := strconv.ParseInt(token[:16], 16, 64)
	if err != nil {
		return 0
	}
	return n
}

// settledView is a settled message as --json prints it.
type settledView struct {
	LockToken      string `json:"lockToken"`
	SequenceNumber int64  `json:"sequenceNumber,omitempty"`
	Outcome        string `json:"outcome"`
	Error          string `json:"error,omitempty"`
}

// printSettled says what became of the message a token locked.
func (e *env) printSettled(token, outcome string, err error) error {
	v := settledView{LockToken: token, SequenceNumber: tokenSeq(token), Outcome: outcome}
	if err != nil {
		v.Outcome, v.Error = "failed", strings.TrimPrefix(err.Error(), "sluice: ")
	}
	if e.json {
		return e.emit(v)
	}
	what := "message " + token
	if v.SequenceNumber != 0 {
		what = fmt.Sprintf("message #%d", v.SequenceNumber)
	}
	if err != nil {
		_, werr := fmt.Fprintf(e.stdout, "%s: not %s: %s\n", what, outcome, v.Error)
		return werr
	}
	_, werr := fmt.Fprintf(e.stdout, "%s %s\n", what, outcome)
	return werr
}

// settleEach settles each token's message with do, printing each
// outcome, and returns the first failure after trying them all.
func settleEach(e *env, tokens []string, outcome string, do func(m *sluice.ReceivedMessage) error) error {
	var first error
	failed := 0
	for _, t := range tokens {
		err := do(&sluice.ReceivedMessage{LockToken: t})
		if err != nil && len(tokens) == 1 && !e.json {
			return err // said once, on stderr
		}
		if perr := e.printSettled(t, outcome, err); perr != nil {
			return perr
		}
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if first != nil && len(tokens) > 1 {
		return fmt.Errorf("%d of %d messages not %s; the first: %w", failed, len(tokens), outcome, first)
	}
	return first
}

// settleOp is a command that settles messages by their lock tokens.
func settleOp(name, outcome, about string, lf *lockFlags, more func(fs *flag.FlagSet), check func() error,
	do func(ctx context.Context, src sluice.MessageSource, m *sluice.ReceivedMessage) error) *op {
	return &op{name: "message " + name, args: "ENTITY TOKEN...", minArgs: 2, maxArgs: -1,
		about: about + "\nTOKEN is a lock token that receive --no-complete printed; the lock must still be held.",
		flags: func(fs *flag.FlagSet) {
			lf.register(fs)
			if more != nil {
				more(fs)
			}
		},
		check: func(args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			if err := checkTokens(args[1:]); err != nil {
				return err
			}
			if check != nil {
				return check()
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			src, err := lf.source(e, args[0])
			if err != nil {
				return err
			}
			return settleEach(e, args[1:], outcome, func(m *sluice.ReceivedMessage) error { return do(ctx, src, m) })
		}}
}

func opMessageComplete() *op {
	var lf lockFlags
	o := settleOp("complete", "completed", "Completes locked messages: they are removed. Several tokens complete in one transaction.", &lf, nil, nil, nil)
	o.run = func(ctx context.Context, e *env, args []string) error {
		src, err := lf.source(e, args[0])
		if err != nil {
			return err
		}
		tokens := args[1:]
		if len(tokens) == 1 {
			return settleEach(e, tokens, "completed", func(m *sluice.ReceivedMessage) error { return src.Complete(ctx, m) })
		}
		msgs := make([]*sluice.ReceivedMessage, len(tokens))
		for i, t := range tokens {
			msgs[i] = &sluice.ReceivedMessage{LockToken: t}
		}
		err = src.CompleteBatch(ctx, msgs)
		var be *sluice.SettleBatchError
		if err != nil && !errors.As(err, &be) {
			return err
		}
		failed := map[int]error{}
		if be != nil {
			for _, f := range be.Failed {
				failed[f.Index] = f.Err
			}
		}
		var first error
		for i, t := range tokens {
			if perr := e.printSettled(t, "completed", failed[i]); perr != nil {
				return perr
			}
			if first == nil {
				first = failed[i]
			}
		}
		if first != nil {
			return fmt.Errorf("%d of %d messages not completed; the first: %w", len(failed), len(tokens), first)
		}
		return nil
	}
	return o
}

// propertyChanges is the --property flag of a settlement, which sets
// application properties on the message as it is settled.
type propertyChanges struct {
	pairs   repeated
	changes map[string]string
}

func (p *propertyChanges) register(fs *flag.FlagSet) {
	fs.Var(&p.pairs, "property", "key=value to set on the message's application properties (repeatable)")
}

func (p *propertyChanges) parse() (err error) {
	p.changes, err = keyValues("property", p.pairs)
	return err
}

func opMessageAbandon() *op {
	var lf lockFlags
	var pc propertyChanges
	var delay time.Duration
	return settleOp("abandon", "abandoned", "Abandons locked messages: they are delivered again (a delivery counts), at once or after --delay.", &lf,
		func(fs *flag.FlagSet) {
			pc.register(fs)
			fs.Var((*durationValue)(&delay), "delay", "keep the messages hidden this long before they are delivered again (peek shows them scheduled)")
		},
		pc.parse,
		func(ctx context.Context, src sluice.MessageSource, m *sluice.ReceivedMessage) error {
			return src.Abandon(ctx, m, &sluice.AbandonOptions{PropertiesToModify: pc.changes, Delay: delay})
		})
}

func opMessageDeadLetter() *op {
	lf := lockFlags{noDLQ: true}
	var reason, description string
	var pc propertyChanges
	return settleOp("dead-letter", "dead-lettered", "Moves locked messages to the entity's dead-letter queue with a reason.", &lf,
		func(fs *flag.FlagSet) {
			fs.StringVar(&reason, "reason", "", "why, as the dead letter's DeadLetterReason (required)")
			fs.StringVar(&description, "description", "", "more about why, as its DeadLetterDescription")
			pc.register(fs)
		},
		func() error {
			if reason == "" {
				return errors.New("--reason is required: a dead letter says why it is one")
			}
			return pc.parse()
		},
		func(ctx context.Context, src sluice.MessageSource, m *sluice.ReceivedMessage) error {
			return src.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: reason, Description: description,
				PropertiesToModify: pc.changes})
		})
}

func opMessageDefer() *op {
	lf := lockFlags{noDLQ: true}
	var pc propertyChanges
	return settleOp("defer", "deferred",
		"Defers locked messages: they are set aside until received by sequence number (receive --deferred).", &lf,
		pc.register, pc.parse,
		func(ctx context.Context, src sluice.MessageSource, m *sluice.ReceivedMessage) error {
			return src.Defer(ctx, m, &sluice.DeferOptions{PropertiesToModify: pc.changes})
		})
}

func opMessageRelease() *op {
	var lf lockFlags
	return settleOp("release", "released",
		"Hands locked messages back at once without counting a delivery: for messages received ahead that will not be\n"+
			"handled. A failed message is abandoned instead. A session's messages go back with the session (session release).", &lf,
		nil, func() error {
			if lf.session != "" {
				return errors.New("a session's messages go back with the session: session release")
			}
			return nil
		},
		func(ctx context.Context, src sluice.MessageSource, m *sluice.ReceivedMessage) error {
			r, ok := src.(interface {
				Release(context.Context, *sluice.ReceivedMessage) error
			})
			if !ok {
				return errors.New("this receiver cannot release")
			}
			return r.Release(ctx, m)
		})
}

// renewedView is a renewed lock as --json prints it.
type renewedView struct {
	LockToken      string `json:"lockToken"`
	SequenceNumber int64  `json:"sequenceNumber,omitempty"`
	LockedUntil    string `json:"lockedUntil,omitempty"`
	Error          string `json:"error,omitempty"`
}

func opMessageRenewLock() *op {
	var dlq bool
	return &op{name: "message renew-lock", args: "ENTITY TOKEN...", minArgs: 2, maxArgs: -1,
		about: "Renews the locks of messages received in peek-lock mode, for another lock duration.\n" +
			"A session's messages are locked by the session lock: renew that with session renew.",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&dlq, "dlq", false, "the messages were received from the entity's dead-letter queue")
		},
		check: func(args []string) error { return checkTokens(args[1:]) },
		run: func(ctx context.Context, e *env, args []string) error {
			r, err := e.api.MessageReceiver(args[0], &sluice.ReceiverOptions{SubQueue: subQueue(dlq)})
			if err != nil {
				return err
			}
			var first error
			for _, t := range args[1:] {
				m := &sluice.ReceivedMessage{LockToken: t}
				err := r.RenewLock(ctx, m)
				v := renewedView{LockToken: t, SequenceNumber: tokenSeq(t)}
				if err != nil {
					v.Error = strings.TrimPrefix(err.Error(), "sluice: ")
					if first == nil {
						first = err
					}
				} else {
					v.LockedUntil = when(m.LockedUntil)
				}
				if e.json {
					err = e.emit(v)
				} else if v.Error != "" {
					_, err = fmt.Fprintf(e.stdout, "message #%d: lock not renewed: %s\n", v.SequenceNumber, v.Error)
				} else {
					_, err = fmt.Fprintf(e.stdout, "message #%d locked until %s\n", v.SequenceNumber, v.LockedUntil)
				}
				if err != nil {
					return err
				}
			}
			return first
		}}
}

func opMessageCancelScheduled() *op {
	var seqs []int64
	return &op{name: "message cancel-scheduled", args: "ENTITY SEQ...", minArgs: 2, maxArgs: -1,
		about: "Cancels scheduled messages of a queue or topic that are not yet due, by the sequence numbers send printed.\n" +
			"All or none: a number that names no scheduled message cancels nothing.",
		check: func(args []string) (err error) {
			seqs, err = sequenceNumbers(args[1:])
			return err
		},
		run: func(ctx context.Context, e *env, args []string) error {
			s, err := e.api.MessageSender(args[0])
			if err != nil {
				return err
			}
			if err := s.CancelScheduled(ctx, seqs...); err != nil {
				return err
			}
			for _, n := range seqs {
				if e.json {
					err = e.emit(map[string]any{"sequenceNumber": n, "outcome": "cancelled"})
				} else {
					_, err = fmt.Fprintf(e.stdout, "scheduled message #%d cancelled\n", n)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}}
}

// sequenceNumbers parses sequence numbers, each positive, given as
// arguments or comma-separated.
func sequenceNumbers(args []string) ([]int64, error) {
	var out []int64
	for _, a := range args {
		for _, s := range strings.Split(a, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("sequence number %q: want a whole number from 1", s)
			}
			out = append(out, n)
		}
	}
	return out, nil
}
