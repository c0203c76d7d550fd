package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice"
)

// heldSession is a session a command works on: resumed under the lock
// token given, or accepted for the command and released after it.
type heldSession struct {
	token string
}

func (h *heldSession) register(fs *flag.FlagSet, required bool) {
	about := "the session lock's token, as receive --session --no-complete printed it"
	if !required {
		about += " (default: accept the session for this command, and release it after)"
	}
	fs.StringVar(&h.token, "session-token", "", about)
}

// open returns the session and what to call once done with it.
func (h *heldSession) open(ctx context.Context, e *env, queue, session string) (sluice.MessageSessionReceiver, func(), error) {
	if h.token != "" {
		s, err := e.api.ResumeMessageSession(queue, session, h.token, nil)
		return s, func() {}, err
	}
	s, err := e.api.AcceptMessageSession(ctx, queue, session, nil)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close(context.WithoutCancel(ctx)) }, nil
}

func opSessionState() *op {
	var h heldSession
	var set, setFile string
	var clear bool
	return &op{name: "session state", args: "QUEUE SESSION", minArgs: 2, maxArgs: 2,
		about: "Prints a session's state, or sets it (--set, --set-file) or clears it (--clear). The session\n" +
			"must be free, or held by the lock --session-token names.",
		flags: func(fs *flag.FlagSet) {
			h.register(fs, false)
			fs.StringVar(&set, "set", "", "set the state to this text")
			fs.StringVar(&setFile, "set-file", "", "set the state to this file's bytes (- for standard input)")
			fs.BoolVar(&clear, "clear", false, "clear the state")
		},
		check: func([]string) error {
			if err := checkSessionToken(h.token); err != nil {
				return err
			}
			n := 0
			for _, b := range []bool{set != "", setFile != "", clear} {
				if b {
					n++
				}
			}
			if n > 1 {
				return errors.New("--set, --set-file and --clear exclude each other")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			var state []byte
			switch {
			case set != "":
				state = []byte(set)
			case setFile == "-":
				b, err := io.ReadAll(e.stdin)
				if err != nil {
					return err
				}
				state = b
			case setFile != "":
				b, err := os.ReadFile(setFile)
				if err != nil {
					return err
				}
				state = b
			}
			s, done, err := h.open(ctx, e, args[0], args[1])
			if err != nil {
				return err
			}
			defer done()
			if state != nil || clear {
				if err := s.SetSessionState(ctx, state); err != nil {
					return err
				}
			}
			if state == nil && !clear {
				if state, err = s.SessionState(ctx); err != nil {
					return err
				}
			}
			if e.json {
				return e.emit(struct {
					Session string `json:"sessionId"`
					body
				}{args[1], bodyOf(state)})
			}
			if len(state) == 0 {
				_, err = fmt.Fprintf(e.stdout, "session %s: no state\n", args[1])
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "session %s state: %s\n", args[1], bodyText(state))
			return err
		}}
}

// sessionLockOp is a command on the session lock --session-token names:
// do acts on it and says what became of it (a key and value for --json,
// and the words after "session ID").
func sessionLockOp(name, about string, do func(ctx context.Context, s sluice.MessageSessionReceiver) (key, value, said string, err error)) *op {
	var h heldSession
	return &op{name: "session " + name, args: "QUEUE SESSION", minArgs: 2, maxArgs: 2, about: about,
		flags: func(fs *flag.FlagSet) { h.register(fs, true) },
		check: func([]string) error {
			if h.token == "" {
				return fmt.Errorf("--session-token is required: it names the lock to %s", name)
			}
			return checkSessionToken(h.token)
		},
		run: func(ctx context.Context, e *env, args []string) error {
			s, _, err := h.open(ctx, e, args[0], args[1])
			if err != nil {
				return err
			}
			key, value, said, err := do(ctx, s)
			if err != nil {
				return err
			}
			if e.json {
				return e.emit(map[string]string{"sessionId": args[1], key: value})
			}
			_, err = fmt.Fprintf(e.stdout, "session %s %s\n", args[1], said)
			return err
		}}
}

func opSessionRenew() *op {
	return sessionLockOp("renew",
		"Renews a session lock and with it the locks of the session's messages, for another lock duration.",
		func(ctx context.Context, s sluice.MessageSessionReceiver) (string, string, string, error) {
			if err := s.RenewSessionLock(ctx); err != nil {
				return "", "", "", err
			}
			until := when(s.LockedUntil())
			return "lockedUntil", until, "locked until " + until, nil
		})
}

func opSessionRelease() *op {
	return sessionLockOp("release",
		"Releases a session lock: the session's messages still locked by it are delivered again.",
		func(ctx context.Context, s sluice.MessageSessionReceiver) (string, string, string, error) {
			// A release of a lock that has ended succeeds, releasing
			// nothing: the renewal says whether it is still held.
			if err := s.RenewSessionLock(ctx); err != nil {
				return "", "", "", err
			}
			return "outcome", "released", "released", s.Close(ctx)
		})
}
