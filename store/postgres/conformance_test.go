package postgres_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/postgres"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestConformance runs the storage conformance suite. Every backend it
// opens shares one fresh schema, as the suite requires (a second Open must
// see the first one's data); the schema is dropped at the end.
func TestConformance(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	storetest.Run(t, func(t *testing.T) store.Backend {
		return openSchema(t, dsn, schema)
	})
}

// TestStalls: a write waiting for a caller's transaction holds back no
// other write, with one commit pipeline and with two.
func TestStalls(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t, dsn)
	storetest.RunStalls(t, func(t *testing.T, pipelines int, log *slog.Logger) store.Backend {
		b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema, CommitPipelines: pipelines, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// TestCrash kills processes writing to a fresh schema and checks that no
// acknowledged write was lost. The schema travels to the child process in
// the DSN's search_path, which Open takes as its schema.
func TestCrash(t *testing.T) {
	dsn := testDSN(t)
	var crashDSN string
	if !storetest.IsChild() {
		crashDSN = withParam(dsn, "search_path", newSchema(t, dsn))
	}
	storetest.CrashTest(t, storetest.CrashEnv{DSN: crashDSN, Open: openDSN})
}

// openDSN opens a backend on dsn (its search_path naming the schema) and
// closes it when the test ends.
func openDSN(t *testing.T, dsn string) store.Backend {
	b, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestEvictionOncePerInterval: processes leasing from one schema share
// one eviction batch per interval.
func TestEvictionOncePerInterval(t *testing.T) {
	dsn := testDSN(t)
	var childDSN string
	if !storetest.IsChild() {
		childDSN = withParam(dsn, "search_path", newSchema(t, dsn))
	}
	storetest.EvictionOncePerInterval(t, storetest.CrashEnv{DSN: childDSN, Open: openDSN})
}

// BenchmarkStore runs the storage benchmarks in a fresh schema.
func BenchmarkStore(b *testing.B) {
	dsn := os.Getenv("SLUICE_TEST_POSTGRES")
	if dsn == "" {
		b.Skip("SLUICE_TEST_POSTGRES is not set")
	}
	storetest.Bench(b, func(b *testing.B) store.Backend {
		schema := newSchema(b, dsn)
		be, err := postgres.Open(b.Context(), postgres.Config{DSN: dsn, Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Close() })
		return be
	})
}
