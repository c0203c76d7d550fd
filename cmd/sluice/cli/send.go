package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicehq/sluice"
)

// bodyFlags give the bodies of messages or events: the arguments, the
// files, or else standard input.
type bodyFlags struct {
	files repeated
}

func (f *bodyFlags) register(fs *flag.FlagSet, what string) {
	fs.Var(&f.files, "file", "send this file's contents as one "+what+" (repeatable)")
}

// bodies returns each argument, then each file's contents; with neither,
// the whole of standard input.
func (f *bodyFlags) bodies(args []string, stdin io.Reader) ([][]byte, error) {
	var out [][]byte
	for _, a := range args {
		out = append(out, []byte(a))
	}
	for _, path := range f.files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		out = append(out, b)
	}
	if len(out) > 0 {
		return out, nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("standard input: %w", err)
	}
	return [][]byte{b}, nil
}

// messageFlags set the properties of the messages send sends: m is the
// template of each.
type messageFlags struct {
	m          sluice.Message
	properties repeated
	scheduleIn time.Duration
	scheduleAt string
}

func (f *messageFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.m.MessageID, "message-id", "", "message id (duplicate detection keys on it)")
	fs.StringVar(&f.m.SessionID, "session-id", "", "session id (required by a queue with sessions)")
	fs.StringVar(&f.m.PartitionKey, "partition-key", "", "partition key")
	fs.StringVar(&f.m.CorrelationID, "correlation-id", "", "correlation id")
	fs.StringVar(&f.m.Subject, "subject", "", "subject")
	fs.StringVar(&f.m.ContentType, "content-type", "", "content type, e.g. application/json")
	fs.StringVar(&f.m.ReplyTo, "reply-to", "", "reply-to entity")
	fs.StringVar(&f.m.ReplyToSessionID, "reply-to-session-id", "", "reply-to session id")
	fs.StringVar(&f.m.To, "to", "", "to")
	fs.Var(&f.properties, "property", "application property key=value (repeatable)")
	fs.Var((*durationValue)(&f.m.TimeToLive), "ttl", "time-to-live (default the entity's)")
	fs.Var((*durationValue)(&f.scheduleIn), "schedule-in", "schedule the messages this long from now")
	fs.StringVar(&f.scheduleAt, "schedule-at", "", "schedule the messages at this time (RFC 3339, e.g. 2030-01-02T15:04:05Z)")
}

// prepare completes the template message from the flags that need
// parsing: the properties and the scheduled time.
func (f *messageFlags) prepare(now time.Time) error {
	var err error
	if f.m.ApplicationProperties, err = keyValues("property", f.properties); err != nil {
		return err
	}
	switch {
	case f.scheduleIn != 0 && f.scheduleAt != "":
		return errors.New("--schedule-in and --schedule-at exclude each other")
	case f.scheduleIn < 0:
		return fmt.Errorf("--schedule-in %v: must not be negative", f.scheduleIn)
	case f.scheduleIn > 0:
		f.m.ScheduledEnqueueTime = now.Add(f.scheduleIn)
	case f.scheduleAt != "":
		if f.m.ScheduledEnqueueTime, err = time.Parse(time.RFC3339, f.scheduleAt); err != nil {
			return fmt.Errorf("--schedule-at: %w", err)
		}
	}
	return nil
}

// messages returns one message for each body, as the flags describe it.
func (f *messageFlags) messages(bodies [][]byte) []*sluice.Message {
	msgs := make([]*sluice.Message, len(bodies))
	for i, b := range bodies {
		m := f.m
		m.Body = b
		msgs[i] = &m
	}
	return msgs
}

func opSend() *op {
	var bf bodyFlags
	var mf messageFlags
	return &op{name: "send", args: "ENTITY [BODY...]", minArgs: 1, maxArgs: -1,
		about: "Sends messages to a queue or topic in one atomic batch: one for each BODY argument, then one for each\n" +
			"--file; with neither, standard input is the body of one. Prints their sequence numbers (a topic numbers\n" +
			"only the scheduled ones, to cancel them; the others get 0).",
		flags: func(fs *flag.FlagSet) {
			bf.register(fs, "message")
			mf.register(fs)
		},
		check: func([]string) error { return mf.prepare(time.Now()) },
		run: func(ctx context.Context, e *env, args []string) error {
			bodies, err := bf.bodies(args[1:], e.stdin)
			if err != nil {
				return err
			}
			s, err := e.api.MessageSender(args[0])
			if err != nil {
				return err
			}
			seqs, err := s.SendBatch(ctx, mf.messages(bodies))
			if err != nil {
				return err
			}
			for _, seq := range seqs {
				if e.json {
					err = e.emit(map[string]int64{"sequenceNumber": seq})
				} else {
					_, err = fmt.Fprintln(e.stdout, seq)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}}
}
