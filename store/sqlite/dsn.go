package sqlite

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// ParseDSN reads a SQLite DSN into a Config: sqlite://PATH,
// sqlite3://PATH, file://PATH, file:PATH or a bare PATH, each optionally
// followed by ?synchronous=FULL or ?synchronous=NORMAL. Any other
// parameter is ErrInvalidArgument: the connection's pragmas are
// sluice's.
func ParseDSN(dsn string) (Config, error) {
	return parseDSN(dsn, store.SQLiteSchemes)
}

// parseDSN reads a DSN in one of schemes, or a bare path, into a Config.
func parseDSN(dsn string, schemes []string) (Config, error) {
	rest := dsn
	if scheme, after, found := strings.Cut(dsn, "://"); found {
		if !slices.Contains(schemes, strings.ToLower(scheme)) {
			return Config{}, fmt.Errorf("sluice: sqlite: DSN scheme %q is not one of %v: %w", scheme, schemes, sluicetype.ErrInvalidArgument)
		}
		rest = after
	} else {
		rest = strings.TrimPrefix(dsn, "file:")
	}
	path, query, _ := strings.Cut(rest, "?")
	cfg := Config{Path: path}
	params, err := url.ParseQuery(query)
	if err != nil {
		return Config{}, fmt.Errorf("sluice: sqlite: DSN parameters: %v: %w", err, sluicetype.ErrInvalidArgument)
	}
	for k, v := range params {
		if k != "synchronous" || len(v) != 1 {
			return Config{}, fmt.Errorf("sluice: sqlite: DSN parameter %q: the only one is synchronous=FULL or NORMAL, once: %w",
				k, sluicetype.ErrInvalidArgument)
		}
		cfg.Synchronous = v[0]
	}
	return cfg, nil
}
