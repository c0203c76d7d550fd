package sluice

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// OpenBackend's errors never show a DSN's password: pgx's parse error is
// masked in its message and its ConnString, and a message that quotes
// the DSN shows it masked, while errors.Is still sees the cause.
func TestOpenBackendErrorsHideCredentials(t *testing.T) {
	for _, dsn := range []string{
		"postgres://user:s3cr3t-pw@127.0.0.1:99999/db",
		"postgres://user:s3cr3t-pw@127.0.0.1:5432/db?sslmode=bogus",
		"mysql://root:s3cr3t-pw@127.0.0.1:3306/",
	} {
		_, err := OpenBackend(t.Context(), dsn, nil)
		if err == nil {
			t.Fatalf("OpenBackend(%q) succeeded", dsn)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("OpenBackend(%q): %v", dsn, err)
		}
		if pe := (*pgconn.ParseConfigError)(nil); errors.As(err, &pe) && strings.Contains(pe.ConnString, "s3cr3t") {
			t.Errorf("OpenBackend(%q): the parse error's ConnString is %q", dsn, pe.ConnString)
		}
	}
	cause := errors.New("unable to open database file: root:s3cr3t-pw@tcp(db:3306)/test")
	err := redactError(cause, "root:s3cr3t-pw@tcp(db:3306)/test")
	if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "root:xxxxx@tcp(db:3306)/test") || !errors.Is(err, cause) {
		t.Errorf("redactError = %v (is the cause: %v)", err, errors.Is(err, cause))
	}
}
