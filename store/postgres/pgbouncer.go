package postgres

import (
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
)

// pgBouncerParam is the DSN parameter that sets Config.PgBouncer; sluice
// removes it before connecting.
const pgBouncerParam = "sluice_pgbouncer"

// pgBouncerTransaction is PgBouncer's transaction pooling mode.
const pgBouncerTransaction = "transaction"

// checkPgBouncer validates Config.PgBouncer.
func checkPgBouncer(mode string) error {
	switch mode {
	case "", "session", pgBouncerTransaction:
		return nil
	}
	return fmt.Errorf("sluice: postgres: PgBouncer mode %q: use transaction, session or nothing: %w",
		mode, sluicetype.ErrInvalidArgument)
}
