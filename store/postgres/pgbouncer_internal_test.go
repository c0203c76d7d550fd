package postgres

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// sluice_pgbouncer=transaction is sluice's, not sent to the server, and
// makes pgx send every query as an unnamed statement; without it pgx
// keeps its default (a statement cache).
func TestPgBouncerConnConfig(t *testing.T) {
	dsn := os.Getenv("SLUICE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("SLUICE_TEST_POSTGRES is not set")
	}
	for mode, want := range map[string]pgx.QueryExecMode{
		"transaction": pgx.QueryExecModeExec,
		"session":     pgx.QueryExecModeCacheStatement,
	} {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		cfg := Config{DSN: dsn + sep + "sluice_pgbouncer=" + mode}
		cc, err := connConfig(t.Context(), &cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, sent := cc.RuntimeParams[pgBouncerParam]; sent || cfg.PgBouncer != mode {
			t.Errorf("%s: the parameter reaches the server (%v) or not the config (%q)", mode, sent, cfg.PgBouncer)
		}
		if cc.DefaultQueryExecMode != want {
			t.Errorf("%s: exec mode %v, want %v", mode, cc.DefaultQueryExecMode, want)
		}
	}
}
