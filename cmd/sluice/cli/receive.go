package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// settleFlags say what receive does with each message it prints.
type settleFlags struct {
	abandon, deferIt, noComplete bool
	deadLetter, description      string
}

func (f *settleFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.abandon, "abandon", false, "abandon each message (delivered again) instead of completing it")
	fs.StringVar(&f.deadLetter, "dead-letter", "", "dead-letter each message with this reason instead of completing it")
	fs.StringVar(&f.description, "dead-letter-description", "", "the description that goes with --dead-letter")
	fs.BoolVar(&f.deferIt, "defer", false, "defer each message instead of completing it")
	fs.BoolVar(&f.noComplete, "no-complete", false, "leave each message locked (print its lock token) instead of completing it")
}

// check refuses settle flags that contradict each other or the receive.
func (f *settleFlags) check(mode sluice.ReceiveMode, dlq bool) error {
	n := 0
	for _, set := range []bool{f.abandon, f.deadLetter != "", f.deferIt, f.noComplete} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("--abandon, --dead-letter, --defer and --no-complete exclude each other")
	case n > 0 && mode == sluice.ReceiveAndDelete:
		return errors.New("--mode receive-and-delete deletes the messages: there is nothing to settle")
	case dlq && (f.deadLetter != "" || f.deferIt):
		return errors.New("a dead letter can only be completed or abandoned")
	case f.description != "" && f.deadLetter == "":
		return errors.New("--dead-letter-description goes with --dead-letter")
	}
	return nil
}

// settle settles m as the flags say, and describes what it did.
func (f *settleFlags) settle(ctx context.Context, src sluice.MessageSource, m *sluice.ReceivedMessage) (string, error) {
	switch {
	case f.noComplete:
		return "left locked until " + when(m.LockedUntil), nil
	case f.abandon:
		return "abandoned", src.Abandon(ctx, m, nil)
	case f.deadLetter != "":
		return "dead-lettered", src.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: f.deadLetter, Description: f.description})
	case f.deferIt:
		return "deferred", src.Defer(ctx, m, nil)
	}
	return "completed", src.Complete(ctx, m)
}

func receiveMode(s string) (sluice.ReceiveMode, error) {
	switch s {
	case "peek-lock":
		return sluice.PeekLock, nil
	case "receive-and-delete":
		return sluice.ReceiveAndDelete, nil
	}
	return 0, fmt.Errorf("--mode %q: want peek-lock or receive-and-delete", s)
}

func subQueue(dlq bool) sluice.SubQueue {
	if dlq {
		return sluice.SubQueueDeadLetter
	}
	return sluice.SubQueueNone
}

func opReceive() *op {
	var sf settleFlags
	var limit int
	var wait time.Duration
	var mode, session string
	var dlq bool
	var m sluice.ReceiveMode
	var deferred repeated
	var seqs []int64
	return &op{name: "receive", args: "ENTITY", minArgs: 1, maxArgs: 1,
		about: "Receives messages from a queue or subscription and prints them. In peek-lock mode each is then\n" +
			"completed, unless --abandon, --dead-letter, --defer or --no-complete says otherwise (message\n" +
			"complete and the others settle a message left locked, by its token). --deferred receives\n" +
			"deferred messages by sequence number. Exits with 4 when there is no message (within --wait).",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "max", 1, "receive up to this many messages")
			fs.Var((*durationValue)(&wait), "wait", "wait this long for messages (0: take what is there now)")
			fs.StringVar(&mode, "mode", "peek-lock", "peek-lock or receive-and-delete")
			fs.BoolVar(&dlq, "dlq", false, "receive from the entity's dead-letter queue")
			fs.StringVar(&session, "session", "", `accept this session of a queue with sessions ("next": the next one with messages)`)
			fs.Var(&deferred, "deferred", "receive the deferred messages of these sequence numbers (comma-separated, repeatable)")
			sf.register(fs)
		},
		check: func([]string) error {
			var err error
			if m, err = receiveMode(mode); err != nil {
				return err
			}
			switch {
			case limit < 1:
				return fmt.Errorf("--max %d: want at least 1", limit)
			case wait < 0:
				return fmt.Errorf("--wait %v: must not be negative", wait)
			case session != "" && dlq:
				return errors.New("--session and --dlq exclude each other: a dead-letter queue has no sessions")
			case len(deferred) > 0 && dlq:
				return errors.New("--deferred and --dlq exclude each other: a dead-letter queue has no deferred messages")
			case len(deferred) > 0 && session == "next":
				return errors.New("--deferred with --session next: name the session of the deferred messages")
			}
			if seqs, err = sequenceNumbers(deferred); err != nil {
				return fmt.Errorf("--deferred: %w", err)
			}
			return sf.check(m, dlq)
		},
		run: func(ctx context.Context, e *env, args []string) error {
			r := &receive{e: e, entity: args[0], opts: &sluice.ReceiverOptions{Mode: m, SubQueue: subQueue(dlq)},
				limit: limit, wait: wait, session: session, deferred: seqs, settle: &sf}
			return r.run(ctx)
		}}
}

// receive is one run of the receive command.
type receive struct {
	e       *env
	entity  string
	opts    *sluice.ReceiverOptions
	limit   int
	wait    time.Duration
	session string
	// deferred, when set, names the deferred messages to receive.
	deferred []int64
	settle   *settleFlags
}

func (r *receive) run(ctx context.Context) error {
	// One deadline covers the accept of a session and the receive.
	wctx := ctx
	if r.wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, r.wait)
		defer cancel()
	}
	waited := r.waiting()
	src, sessionToken, release, err := r.source(ctx, wctx)
	if err != nil {
		waited()
		return r.nothing(ctx, err)
	}
	defer release()
	var msgs []*sluice.ReceivedMessage
	switch {
	case len(r.deferred) > 0:
		msgs, err = src.ReceiveDeferred(ctx, r.deferred...)
	case r.wait > 0:
		msgs, err = src.Receive(wctx, r.limit)
	default:
		msgs, err = src.TryReceive(ctx, r.limit)
	}
	waited()
	if err != nil {
		return r.nothing(ctx, err)
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%s: %w", r.entity, errNothing)
	}
	for _, m := range msgs {
		v := viewOf(m)
		if r.settle.noComplete {
			v.SessionLockToken = sessionToken
		}
		if err := r.e.printMessage(v); err != nil {
			return err
		}
		if r.opts.Mode == sluice.ReceiveAndDelete {
			continue
		}
		did, err := r.settle.settle(ctx, src, m)
		if err != nil {
			return fmt.Errorf("message #%d: %w", m.SequenceNumber, err)
		}
		if !r.e.json {
			fmt.Fprintf(r.e.stdout, "  %s\n", did)
		}
	}
	return nil
}

// source returns what to receive from: the entity, or a session of it
// accepted within wctx. release hands the session back, unless its
// messages stay locked (--no-complete), whose lock then ends with the
// session's.
func (r *receive) source(ctx, wctx context.Context) (src sluice.MessageSource, sessionToken string, release func(), err error) {
	noop := func() {}
	if r.session == "" {
		rc, err := r.e.api.MessageReceiver(r.entity, r.opts)
		return rc, "", noop, err
	}
	var s sluice.MessageSessionReceiver
	if r.session == "next" {
		actx := wctx
		if r.wait == 0 {
			// A context that has ended takes a session only if one is
			// free now, on a database and through a server alike.
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(ctx, 0)
			defer cancel()
		}
		s, err = r.e.api.AcceptNextMessageSession(actx, r.entity, r.opts)
	} else {
		s, err = r.e.api.AcceptMessageSession(wctx, r.entity, r.session, r.opts)
	}
	if err != nil {
		return nil, "", noop, err
	}
	if !r.e.json {
		fmt.Fprintf(r.e.stdout, "session %s (lock token %s)\n", s.SessionID(), s.LockToken())
	}
	if r.settle.noComplete {
		return s, s.LockToken(), noop, nil
	}
	return s, "", func() { s.Close(context.WithoutCancel(ctx)) }, nil
}

// nothing turns a wait that ran out into errNothing.
func (r *receive) nothing(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", r.entity, errNothing)
	}
	return err
}

func opPeek() *op {
	var from int64
	var limit int
	var dlq, filtered bool
	var ff filterFlags
	return &op{name: "peek", args: "ENTITY", minArgs: 1, maxArgs: 1,
		about: "Prints messages of a queue or subscription in sequence order, whatever their state, without locking them;\n" +
			"with --state, --message-id, --correlation-id, --subject, --session, --property or --reason, only those that\n" +
			"match, searched on the server (or the database) a bounded page at a time.",
		flags: func(fs *flag.FlagSet) {
			fs.Int64Var(&from, "from", 0, "the first sequence number to print (default the first message)")
			fs.IntVar(&limit, "max", 10, fmt.Sprintf("print up to this many messages (at most %d)", sluice.MaxPeek))
			fs.BoolVar(&dlq, "dlq", false, "peek the entity's dead-letter queue")
			ff.register(fs)
		},
		check: func([]string) (err error) {
			if limit < 1 || limit > sluice.MaxPeek {
				return fmt.Errorf("--max %d: want 1 to %d", limit, sluice.MaxPeek)
			}
			filtered, err = ff.check(dlq)
			return err
		},
		run: func(ctx context.Context, e *env, args []string) error {
			var msgs []*sluice.ReceivedMessage
			var err error
			if filtered {
				msgs, err = search(ctx, e.api, args[0], dlq, from, limit, ff.filter)
			} else {
				msgs, err = peek(ctx, e.api, args[0], dlq, from, limit)
			}
			if err != nil {
				return err
			}
			for _, m := range msgs {
				v := viewOf(m)
				if !dlq {
					v.State = m.State.String()
				}
				if err := e.printMessage(v); err != nil {
					return err
				}
			}
			return nil
		}}
}

// peek returns up to limit messages of an entity (or its dead-letter
// queue) from the sequence number from on, in as many peeks as it takes.
func peek(ctx context.Context, a sluiceAPI, entity string, dlq bool, from int64, limit int) ([]*sluice.ReceivedMessage, error) {
	r, err := a.MessageReceiver(entity, &sluice.ReceiverOptions{SubQueue: subQueue(dlq)})
	if err != nil {
		return nil, err
	}
	var out []*sluice.ReceivedMessage
	for len(out) < limit {
		page, err := r.Peek(ctx, min(limit-len(out), sluice.MaxPeek), &sluice.PeekOptions{FromSequenceNumber: max(from, 1)})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		out = append(out, page...)
		from = page[len(page)-1].SequenceNumber + 1
	}
	return out, nil
}

// waiting says on a terminal that the receive waits (up to --wait), and
// returns what clears that line once it is done.
func (r *receive) waiting() func() {
	if r.wait <= 0 || !isTerminal(r.e.stderr) {
		return func() {}
	}
	fmt.Fprintf(r.e.stderr, "waiting up to %v for a message on %s...", r.wait, r.entity)
	return sync.OnceFunc(func() { fmt.Fprint(r.e.stderr, "\r\033[K") })
}
