package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/sluicehq/sluice"
)

func opDLQList() *op {
	var from int64
	var limit int
	return &op{name: "dlq list", args: "ENTITY", minArgs: 1, maxArgs: 1,
		check: func([]string) error {
			if limit < 1 {
				return fmt.Errorf("--max %d: want at least 1", limit)
			}
			return nil
		},
		about: "Prints the dead letters of a queue or subscription, with why each was dead-lettered, without locking them.",
		flags: func(fs *flag.FlagSet) {
			fs.Int64Var(&from, "from", 0, "the first sequence number to print (default the first dead letter)")
			fs.IntVar(&limit, "max", 100, "print up to this many dead letters")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			msgs, err := peek(ctx, e.api, args[0], true, from, limit)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if err := e.printMessage(viewOf(m)); err != nil {
					return err
				}
			}
			return nil
		}}
}

// deadSelection is which dead letters a command acts on: those whose
// sequence numbers are its arguments, those of --reason (--reason ""
// those dead-lettered without one), or all.
type deadSelection struct {
	seqs     []int64
	reason   string
	byReason bool
}

func (d *deadSelection) register(fs *flag.FlagSet) {
	fs.Func("reason", `only the dead letters with this dead-letter reason, as dlq reasons shows it ("" for those without one)`, func(s string) error {
		d.reason, d.byReason = s, true
		return nil
	})
}

// check reads the sequence numbers among args (after the entity).
func (d *deadSelection) check(args []string) (err error) {
	if d.byReason && len(args) > 1 {
		return errors.New("--reason and sequence numbers exclude each other")
	}
	d.seqs, err = sequenceNumbers(args[1:])
	return err
}

// all says whether the selection is every dead letter.
func (d *deadSelection) all() bool { return !d.byReason && len(d.seqs) == 0 }

// resolve finds the dead letters of --reason, if it was given.
func (d *deadSelection) resolve(ctx context.Context, a sluiceAPI, entity string) error {
	if !d.byReason {
		return nil
	}
	var err error
	d.seqs, err = deadLettersFor(ctx, a, entity, d.reason)
	return err
}

func opDLQResubmit() *op {
	var sel deadSelection
	return &op{name: "dlq resubmit", args: "ENTITY [SEQ...]", minArgs: 1, maxArgs: -1,
		about: "Moves dead letters back to their queue or subscription as new messages, in atomic batches:\n" +
			"those whose sequence numbers are given, those dead-lettered for --reason, or all of them.",
		flags: sel.register,
		confirm: func(args []string) string {
			switch {
			case len(args) > 1:
				return "" // only those named
			case sel.byReason:
				return fmt.Sprintf("Resubmit every dead letter of %s dead-lettered for %q", args[0], sel.reason)
			}
			return fmt.Sprintf("Resubmit every dead letter of %s", args[0])
		},
		check: sel.check,
		run: func(ctx context.Context, e *env, args []string) error {
			if err := sel.resolve(ctx, e.api, args[0]); err != nil {
				return err
			}
			if sel.byReason && len(sel.seqs) == 0 {
				return e.printCount("resubmitted", 0)
			}
			opts := &sluice.ResubmitOptions{SequenceNumbers: sel.seqs}
			bar := &progressBar{w: e.stderr}
			if isTerminal(e.stderr) {
				opts.Progress = bar.update
			}
			n, err := e.api.ResubmitDeadLetters(ctx, args[0], opts)
			bar.finish()
			if n == 0 && err != nil {
				return err
			}
			if perr := e.printCount("resubmitted", int64(n)); err == nil {
				err = perr
			}
			return err
		}}
}

func opDLQPurge() *op {
	var sel deadSelection
	return &op{name: "dlq purge", args: "ENTITY [SEQ...]", minArgs: 1, maxArgs: -1,
		about: "Deletes dead letters of a queue or subscription: those whose sequence numbers are given, those\n" +
			"dead-lettered for --reason, or every one.",
		flags: sel.register,
		confirm: func(args []string) string {
			switch {
			case len(args) > 1:
				return fmt.Sprintf("Delete %d dead letter(s) of %s", len(sel.seqs), args[0])
			case sel.byReason:
				return fmt.Sprintf("Delete every dead letter of %s dead-lettered for %q", args[0], sel.reason)
			}
			return fmt.Sprintf("Delete every dead letter of %s", args[0])
		},
		check: sel.check,
		run: func(ctx context.Context, e *env, args []string) error {
			if sel.all() {
				n, err := e.api.PurgeDeadLetters(ctx, args[0])
				if err != nil {
					return err
				}
				return e.printCount("purged", n)
			}
			if err := sel.resolve(ctx, e.api, args[0]); err != nil {
				return err
			}
			// In batches, each one transaction.
			var total int64
			for batch := range slices.Chunk(sel.seqs, deleteBatch) {
				n, err := e.api.DeleteDeadLetters(ctx, args[0], batch...)
				total += n
				if err != nil {
					if total > 0 {
						e.printCount("purged", total)
					}
					return err
				}
			}
			return e.printCount("purged", total)
		}}
}

// deleteBatch is how many dead letters one delete names: the backends'
// default batch limit.
const deleteBatch = 1000

// printCount prints how many things an action did: "purged 3", or
// {"purged": 3}.
func (e *env) printCount(action string, n int64) error {
	if e.json {
		return e.emit(map[string]int64{action: n})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %d\n", action, n)
	return err
}

// progressBar draws a resubmit's progress in place, redrawn with \r, once
// it takes more than one batch.
type progressBar struct {
	w     io.Writer
	drawn bool
}

const progressWidth = 30

func (p *progressBar) update(done, total int) {
	if !p.drawn && done >= total {
		return // one batch moved them all
	}
	p.drawn = true
	fill := progressWidth * min(done, total) / max(total, 1)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("=", fill), strings.Repeat(" ", progressWidth-fill), done, total)
}

// finish ends the bar's line, if it drew one.
func (p *progressBar) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// isTerminal says w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// deadLettersFor lists the sequence numbers of an entity's dead letters
// dead-lettered for reason, searched on the server (or the database).
func deadLettersFor(ctx context.Context, a sluiceAPI, entity, reason string) ([]int64, error) {
	msgs, err := search(ctx, a, entity, true, 0, math.MaxInt, sluice.MessageFilter{DeadLetterReason: &reason})
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = m.SequenceNumber
	}
	return seqs, err
}
