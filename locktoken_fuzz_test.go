package sluice

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
)

// FuzzLockToken parses arbitrary text as a message's lock token, as a
// settle by token from the network does: a token is accepted only when
// it is 32 hex digits naming a positive sequence number, and then it
// formats back as itself (in lower case); anything else fails with
// ErrInvalidArgument. Every receipt of a positive sequence number
// formats as a token that parses back to it.
func FuzzLockToken(f *testing.F) {
	for _, s := range []string{
		"", "0", "00000000000000010000000000000002", "7fffffffffffffffffffffffffffffff",
		"8000000000000000ffffffffffffffff", "00000000000000000000000000000001", "0000000000000001000000000000000G",
		"ABCDEF0123456789abcdef0123456789", "+0000000000000010000000000000002", "0x000000000000010000000000000002",
		"0000_000000000010000000000000002", "00000000000000010000000000000002 ", "é000000000000010000000000000002",
	} {
		f.Add(s, int64(1), int64(2))
	}
	f.Add("", int64(-1), int64(-1))
	f.Add("", int64(0), int64(0))
	f.Add("", int64(1<<63-1), int64(-1<<63))
	f.Fuzz(func(t *testing.T, token string, seq, tok int64) {
		r, err := (&ReceivedMessage{LockToken: token}).receipt()
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("lock token %q: error %v, want ErrInvalidArgument", token, err)
			}
		} else {
			if len(token) != 32 || strings.Trim(strings.ToLower(token), "0123456789abcdef") != "" || r.Seq <= 0 {
				t.Fatalf("lock token %q accepted as %+v", token, r)
			}
			if back := lockToken(r); back != strings.ToLower(token) {
				t.Fatalf("lock token %q parses as %+v, which formats as %q", token, r, back)
			}
		}

		in := sluicetype.Receipt{Seq: seq, Token: tok}
		out, err := (&ReceivedMessage{LockToken: lockToken(in)}).receipt()
		switch {
		case seq > 0 && (err != nil || out != in):
			t.Fatalf("receipt %+v formats as %q, which parses as %+v, %v", in, lockToken(in), out, err)
		case seq <= 0 && !errors.Is(err, ErrInvalidArgument):
			t.Fatalf("receipt %+v of no message formats as %q, which parses as %+v, %v", in, lockToken(in), out, err)
		}
	})
}
