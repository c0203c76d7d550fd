package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/store/internal/engine"
)

// classify tells a connection lost once a request may have gone out
// (engine.ErrNoReply) from the failures that prove nothing was sent, and
// from the server's own errors.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{&pgconn.PgError{Code: "40001"}, engine.ErrRetry},
		{&pgconn.PgError{Code: "23505"}, engine.ErrDuplicate},
		{&pgconn.PgError{Code: "42P01"}, nil},
		{fmt.Errorf("x: %w", io.ErrUnexpectedEOF), engine.ErrNoReply},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, engine.ErrNoReply},
		// pgx's "conn closed" for the reply of a COMMIT it sent.
		{fmt.Errorf("commit: %w", pgconn.ErrConnClosed), engine.ErrNoReply},
		{driver.ErrBadConn, nil},
		{&pgconn.ConnectError{}, nil},
		{context.Canceled, nil},
		{context.DeadlineExceeded, nil},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%T %v) = %v, want %v", c.err, errText(c.err), got, c.want)
		}
	}
}

func errText(err error) string {
	if _, ok := err.(*pgconn.ConnectError); ok {
		return "connect failed" // its Error needs a Config
	}
	return err.Error()
}
