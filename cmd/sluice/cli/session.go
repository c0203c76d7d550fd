package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
func (h *heldSession) open(ctx context.Context, e *env, queue, session string) (sessionReceiver, func(), error) {
	if h.token != "" {
		s, err := e.api.ResumeSession(queue, session, h.token, nil)
		return s, func() {}, err
	}
	s, err := e.api.AcceptSession(ctx, queue, session, nil)
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

func opSessionRenew() *op {
	var h heldSession
	return &op{name: "session renew", args: "QUEUE SESSION", minArgs: 2, maxArgs: 2,
		about: "Renews a session lock and with it the locks of the session's messages, for another lock duration.",
		flags: func(fs *flag.FlagSet) { h.register(fs, true) },
		check: func([]string) error {
			if h.token == "" {
				return errors.New("--session-token is required: it names the lock to renew")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			s, _, err := h.open(ctx, e, args[0], args[1])
			if err != nil {
				return err
			}
			if err := s.RenewSessionLock(ctx); err != nil {
				return err
			}
			if e.json {
				return e.emit(map[string]string{"sessionId": args[1], "lockedUntil": when(s.LockedUntil())})
			}
			_, err = fmt.Fprintf(e.stdout, "session %s locked until %s\n", args[1], when(s.LockedUntil()))
			return err
		}}
}

func opSessionRelease() *op {
	var h heldSession
	return &op{name: "session release", args: "QUEUE SESSION", minArgs: 2, maxArgs: 2,
		about: "Releases a session lock: the session's messages still locked by it are delivered again.",
		flags: func(fs *flag.FlagSet) { h.register(fs, true) },
		check: func([]string) error {
			if h.token == "" {
				return errors.New("--session-token is required: it names the lock to release")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			s, _, err := h.open(ctx, e, args[0], args[1])
			if err != nil {
				return err
			}
			if err := s.Close(ctx); err != nil {
				return err
			}
			if e.json {
				return e.emit(map[string]string{"sessionId": args[1], "outcome": "released"})
			}
			_, err = fmt.Fprintf(e.stdout, "session %s released\n", args[1])
			return err
		}}
}
