package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// DBConfig opens a MariaDB or MySQL backend on the application's pool
// (OpenDB). Every field may be left out: zero values take defaults, and
// a nil *DBConfig is all defaults.
type DBConfig struct {
	// Limits bound calls; zero fields take defaults.
	Limits store.Limits
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// CommitPipelines is how many group commits run at once, each on a
	// connection of the pool (default 2, at most a quarter of the pool's
	// MaxOpenConns; see store.OpenOptions.CommitPipelines).
	CommitPipelines int
	// SkipMigrations opens without migrating: the schema must be at this
	// build's version (see store.OpenOptions.SkipMigrations).
	SkipMigrations bool
}

// OpenDB opens a backend on the application's *sql.DB, which must run on
// github.com/go-sql-driver/mysql and which the backend never closes.
// sluice cannot change a pool's connection settings, so it checks one of
// its connections and fails with ErrInvalidArgument unless it has the
// settings Open forces (see the package documentation): time_zone
// '+00:00', transaction isolation READ-COMMITTED and the utf8mb4
// character set; set them in the DSN, e.g.
// ?time_zone=%27%2B00%3A00%27&transaction_isolation=%27READ-COMMITTED%27&charset=utf8mb4.
// clientFoundRows must stay off (the driver's default): no query can
// tell. A nil cfg takes the defaults.
func OpenDB(ctx context.Context, db *sql.DB, cfg *DBConfig) (store.Backend, error) {
	if err := checkPool(ctx, db); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &DBConfig{}
	}
	return start(ctx, db, store.OpenOptions{Limits: cfg.Limits, Logger: cfg.Logger, CommitPipelines: cfg.CommitPipelines, SkipMigrations: cfg.SkipMigrations}, true)
}

// checkPool checks the driver and the settings of one of db's
// connections.
func checkPool(ctx context.Context, db *sql.DB) error {
	if db == nil {
		return fmt.Errorf("sluice: mysql: the *sql.DB is nil: %w", sluicetype.ErrInvalidArgument)
	}
	if !ownsDriver(db.Driver()) {
		return fmt.Errorf("sluice: mysql: the *sql.DB runs on driver %T, not github.com/go-sql-driver/mysql: %w",
			db.Driver(), sluicetype.ErrInvalidArgument)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sluice: mysql: %w", err)
	}
	defer conn.Close()
	// @@tx_isolation is MariaDB's older name of the same variable.
	var tz, charset, isolation string
	err = conn.QueryRowContext(ctx, "SELECT @@session.time_zone, @@session.character_set_client").Scan(&tz, &charset)
	if err == nil {
		err = conn.QueryRowContext(ctx, "SELECT @@session.transaction_isolation").Scan(&isolation)
		if err != nil {
			err = conn.QueryRowContext(ctx, "SELECT @@session.tx_isolation").Scan(&isolation)
		}
	}
	if err != nil {
		return fmt.Errorf("sluice: mysql: read the connection's settings: %w", err)
	}
	var wrong []string
	if tz != "+00:00" {
		wrong = append(wrong, fmt.Sprintf("time_zone is %q, want '+00:00'", tz))
	}
	if isolation != "READ-COMMITTED" {
		wrong = append(wrong, fmt.Sprintf("transaction isolation is %s, want READ-COMMITTED", isolation))
	}
	if charset != "utf8mb4" {
		wrong = append(wrong, fmt.Sprintf("character set is %s, want utf8mb4", charset))
	}
	if len(wrong) > 0 {
		return fmt.Errorf("sluice: mysql: the *sql.DB's connections: %s; set them in its DSN "+
			"(time_zone='+00:00', transaction_isolation='READ-COMMITTED', charset=utf8mb4): %w",
			strings.Join(wrong, "; "), sluicetype.ErrInvalidArgument)
	}
	return nil
}
