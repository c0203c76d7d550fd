package sluice_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// FuzzTokenSettle settles, renews and resumes by arbitrary tokens on a
// SQLite-backed queue, as the server does with the tokens clients send:
// a message's lock token is refused with ErrInvalidArgument unless it is
// 32 hex digits, and one that is well formed but holds no lock fails
// with ErrLockLost; a session's lock token is refused unless it is 16
// hex digits, and an accepted one formats back as itself.
func FuzzTokenSettle(f *testing.F) {
	for _, s := range []string{
		"", "00000000000000010000000000000002", "0000000000000001", "ffffffffffffffff", "FFFFFFFFFFFFFFFF",
		"000000000000000G", "+000000000000001", "0x00000000000001", "0000_00000000001", "00000000000000000000000000000001",
		"00000000000000010000000000000002 ", "é00000000000001",
	} {
		f.Add(s)
	}
	ctx := f.Context()
	c, err := sluice.Open(ctx, "sqlite://"+f.TempDir()+"/fuzz.db", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	for _, q := range []struct {
		name     string
		sessions bool
	}{{"plain", false}, {"sessions", true}} {
		if _, err := c.CreateQueue(ctx, q.name, &sluice.QueueProperties{RequiresSession: q.sessions}); err != nil {
			f.Fatal(err)
		}
	}
	r, err := c.NewReceiver("plain", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		ctx := t.Context()
		m := &sluice.ReceivedMessage{LockToken: token}
		wellFormed := len(token) == 32 && isHex(token) && token[0] <= '7' && strings.Trim(token[:16], "0") != ""
		for name, settle := range map[string]func() error{
			"complete": func() error { return r.Complete(ctx, m) },
			"renew":    func() error { return r.RenewLock(ctx, m) },
		} {
			err := settle()
			switch {
			case wellFormed && !errors.Is(err, sluice.ErrLockLost):
				t.Fatalf("%s by lock token %q of no lock: %v, want ErrLockLost", name, token, err)
			case !wellFormed && !errors.Is(err, sluice.ErrInvalidArgument):
				t.Fatalf("%s by lock token %q: %v, want ErrInvalidArgument", name, token, err)
			}
		}

		s, err := c.ResumeSession("sessions", "s", token, nil)
		switch {
		case err != nil && !errors.Is(err, sluice.ErrInvalidArgument):
			t.Fatalf("resume session by token %q: %v, want ErrInvalidArgument", token, err)
		case err != nil && len(token) == 16 && isHex(token):
			t.Fatalf("resume session by token %q: %v", token, err)
		case err == nil && !(len(token) == 16 && isHex(token)):
			t.Fatalf("resume session by token %q: accepted", token)
		case err == nil && s.LockToken() != strings.ToLower(token):
			t.Fatalf("session resumed by token %q has token %q", token, s.LockToken())
		}
	})
}

func isHex(s string) bool {
	return s != "" && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}
