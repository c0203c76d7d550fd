package testdb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// Kinds are the backends tests run on.
var Kinds = []string{"sqlite", "postgres", "mysql"}

// Shared holds one backend of each kind for a whole test binary, each on
// a database of its own (a temporary SQLite file, a fresh PostgreSQL
// schema, a fresh MariaDB database): every test works in a tenant of its
// own on it. Close it from TestMain.
type Shared struct {
	// Open opens a backend on a DSN (sluice.OpenBackend, usually).
	Open func(ctx context.Context, dsn string) (store.Backend, error)

	mu       sync.Mutex
	backends map[string]store.Backend
	dsns     map[string]string
	errs     map[string]error
	cleanups []func() error
}

// Backend returns the backend of a kind, opening it on first use; it
// skips the test (fails it in CI) when the kind's server is not
// configured.
func (s *Shared) Backend(t testing.TB, kind string) store.Backend {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.backends[kind]; ok {
		return b
	}
	if err, ok := s.errs[kind]; ok {
		Check(t, err)
	}
	b, err := s.open(kind)
	if err != nil {
		if s.errs == nil {
			s.errs = make(map[string]error)
		}
		s.errs[kind] = err
		Check(t, err)
	}
	if s.backends == nil {
		s.backends = make(map[string]store.Backend)
	}
	s.backends[kind] = b
	return b
}

// DSN returns the DSN of the kind's database, once Backend opened it:
// for another process, or another backend on the same database.
func (s *Shared) DSN(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dsns[kind]
}

func (s *Shared) open(kind string) (store.Backend, error) {
	ctx := context.Background()
	var (
		dsn  string
		drop func() error
		err  error
	)
	switch kind {
	case "sqlite":
		dir, derr := os.MkdirTemp("", "sluice-test")
		if derr != nil {
			return nil, derr
		}
		dsn, drop = "sqlite://"+filepath.Join(dir, "sluice.db"), func() error { return os.RemoveAll(dir) }
	case "postgres":
		dsn, drop, err = Postgres(ctx)
	case "mysql":
		dsn, drop, err = MySQL(ctx)
	default:
		return nil, errors.New("unknown backend kind " + kind)
	}
	if err != nil {
		return nil, err
	}
	s.cleanups = append(s.cleanups, drop)
	if s.dsns == nil {
		s.dsns = make(map[string]string)
	}
	s.dsns[kind] = dsn
	return s.Open(ctx, dsn)
}

// Close closes the backends and drops their databases.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, b := range s.backends {
		errs = append(errs, b.Close())
	}
	for _, c := range s.cleanups {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
