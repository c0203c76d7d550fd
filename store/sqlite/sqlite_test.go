package sqlite_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/sqlite"
	"github.com/sluicehq/sluice/store/storetest"
	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine (a committer, a pool's opener)
// outlives the backends the tests closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t testing.TB, path string) store.Backend {
	t.Helper()
	b, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestConformance runs the suite against one file shared by every
// subtest; each subtest is its own tenant.
func TestConformance(t *testing.T) {
	var (
		once sync.Once
		path string
	)
	storetest.Run(t, func(tt *testing.T) store.Backend {
		once.Do(func() { path = filepath.Join(t.TempDir(), "conformance.db") })
		return open(tt, path)
	})
}

func TestCrash(t *testing.T) {
	storetest.CrashTest(t, storetest.CrashEnv{
		DSN:  filepath.Join(t.TempDir(), "crash.db"),
		Open: func(t *testing.T, dsn string) store.Backend { return open(t, dsn) },
	})
}

// TestEvictionOncePerInterval: processes leasing from one file share one
// eviction batch per interval.
func TestEvictionOncePerInterval(t *testing.T) {
	storetest.EvictionOncePerInterval(t, storetest.CrashEnv{
		DSN:  filepath.Join(t.TempDir(), "evict.db"),
		Open: func(t *testing.T, dsn string) store.Backend { return open(t, dsn) },
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Backend {
		return open(b, filepath.Join(b.TempDir(), "bench.db"))
	})
}
