package engine

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/store"
)

// Dialect is what a backend gives the engine: its SQL, embedded as files,
// its capabilities, and the few facts about its driver that SQL cannot
// express.
type Dialect struct {
	// Features describes the backend.
	Features store.Features
	// Queries holds *.sql files of named queries ("-- name: X" headers).
	Queries fs.FS
	// Migrations holds NNNN_description.sql files applied in order.
	Migrations fs.FS
	// Capabilities says what the dialect can do beyond what every
	// dialect does; its queries must match (see Capabilities).
	Capabilities Capabilities
	// IntList encodes a list of int64 for a list parameter.
	IntList func([]int64) any
	// CopyFrom, where the dialect has one (PostgreSQL's COPY, through pgx),
	// bulk-loads rows into a table on the driver connection (what
	// sql.Conn.Raw hands over) of an open transaction: a group commit
	// inserts large batches of messages this way (see copyMinRows).
	CopyFrom func(ctx context.Context, driverConn any, table string, columns []string, rows [][]any) error
	// Pipeline, where the dialect has one (PostgreSQL, through pgx), sends
	// statements at once on the driver connection (what sql.Conn.Raw hands
	// over), outside a transaction, and runs them in one implicit
	// transaction: their effects commit together when the last one ends,
	// or none does. It calls each statement's Read with its rows, in
	// order, before it knows whether the group committed; it returns the
	// first statement's error, or the commit's. A connection it cannot
	// pipeline on (another driver's) is errors.ErrUnsupported.
	Pipeline func(ctx context.Context, driverConn any, stmts []PipelineStmt) error
	// Classify maps a driver error to ErrRetry, ErrDuplicate, ErrNoReply,
	// or nil for any other error.
	Classify func(error) error
}

// Kinds of driver errors Dialect.Classify reports.
var (
	// ErrRetry marks a deadlock, serialization failure, lock timeout or busy
	// database: the transaction may succeed if run again.
	ErrRetry = fmt.Errorf("retryable")
	// ErrDuplicate marks a unique-key violation.
	ErrDuplicate = fmt.Errorf("duplicate key")
	// ErrNoReply marks a connection that broke (or timed out) after a
	// request was sent, or may have been, and before its reply was read:
	// the server may have run it. Errors that prove nothing ran are not
	// marked: a reply of the server (an error it reported), a connection
	// that was never opened (a connect failure) or broke before the
	// request went out (driver.ErrBadConn and the like), a context that
	// ended first. Inside a transaction a broken connection applies
	// nothing (the server rolls back what it never saw committed); after
	// a COMMIT, or a statement outside a transaction, the engine reports
	// it as sluicetype.ErrOutcomeUnknown.
	ErrNoReply = fmt.Errorf("no reply")
)

// ParseQueries reads every *.sql file of fsys and splits it on
// "-- name: X" lines, as New does with a dialect's queries (backend tests
// use it to run a named query by itself). Comment lines inside a query
// are kept out; every query all dialects define must be there and no
// unknown one (New checks the optional ones against the dialect's
// Capabilities).
func ParseQueries(fsys fs.FS) (map[string]string, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	queries := make(map[string]string)
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var name string
		var body strings.Builder
		flush := func() error {
			if name == "" {
				return nil
			}
			q := strings.TrimSpace(body.String())
			q = strings.TrimSuffix(q, ";")
			if q == "" {
				return fmt.Errorf("%s: query %s is empty", f, name)
			}
			if _, dup := queries[name]; dup {
				return fmt.Errorf("%s: query %s defined twice", f, name)
			}
			queries[name] = q
			body.Reset()
			return nil
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			if n, ok := strings.CutPrefix(trimmed, "-- name:"); ok {
				if err := flush(); err != nil {
					return nil, err
				}
				name = strings.TrimSpace(n)
				continue
			}
			if strings.HasPrefix(trimmed, "--") || name == "" {
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		if err := flush(); err != nil {
			return nil, err
		}
	}
	for _, n := range queryNames {
		if _, ok := queries[n]; !ok {
			return nil, fmt.Errorf("query %s is missing", n)
		}
	}
	for n := range queries {
		if !optionalQueries[n] && !contains(queryNames, n) {
			return nil, fmt.Errorf("query %s is unknown", n)
		}
	}
	return queries, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// migration is one versioned schema change.
type migration struct {
	version    int
	name       string
	text       string
	statements []string
}

// parseMigrations reads NNNN_name.sql files in version order and splits
// each into statements on lines ending in ';'.
func parseMigrations(fsys fs.FS) ([]migration, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, f := range files {
		base := path.Base(f)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version and '_'", f)
		}
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		m := migration{version: v, name: base, text: string(data)}
		var stmt strings.Builder
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			line := sc.Text()
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "--") || trimmed == "" {
				continue
			}
			stmt.WriteString(line)
			stmt.WriteByte('\n')
			if strings.HasSuffix(trimmed, ";") {
				m.statements = append(m.statements, strings.TrimSuffix(strings.TrimSpace(stmt.String()), ";"))
				stmt.Reset()
			}
		}
		if strings.TrimSpace(stmt.String()) != "" {
			return nil, fmt.Errorf("migration %s: last statement lacks a ';'", f)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].name, out[i].name, out[i].version)
		}
	}
	return out, nil
}
