package mysql

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/engine"
	"github.com/sluicehq/sluice/store/storetest"
)

// testDSN returns the server DSN from SLUICE_TEST_MYSQL, skipping the test
// when it is unset (failing it in CI, where it must be set).
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("SLUICE_TEST_MYSQL")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SLUICE_TEST_MYSQL is not set (try SLUICE_TEST_MYSQL=mysql://root@127.0.0.1:3306/test)")
		}
		t.Skip("SLUICE_TEST_MYSQL is not set; set it to run the MySQL tests (e.g. mysql://root@127.0.0.1:3306/test)")
	}
	return dsn
}

// freshDatabase creates a database of its own for the test on the server
// SLUICE_TEST_MYSQL names, drops it when the test ends, and returns the
// DSN of the new database.
func freshDatabase(t *testing.T) string {
	t.Helper()
	dc, err := parseDSN(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", dc.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 6)
	rand.Read(b)
	name := "sluice_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	dc.DBName = name
	return dc.FormatDSN()
}

// openBackend opens a Backend on dsn and closes it when the test ends.
func openBackend(t *testing.T, dsn string) store.Backend {
	t.Helper()
	b, err := Open(t.Context(), Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	var (
		once sync.Once
		dsn  string
	)
	storetest.Run(t, func(tt *testing.T) store.Backend {
		// One database for the whole suite, created on the first call:
		// every call must return a Backend on the same database.
		once.Do(func() { dsn = freshDatabase(t) })
		return openBackend(tt, dsn)
	})
}

// TestStalls: a write waiting for a caller's transaction holds back no
// other write, with one commit pipeline and with two.
func TestStalls(t *testing.T) {
	dsn := freshDatabase(t)
	storetest.RunStalls(t, func(t *testing.T, pipelines int, log *slog.Logger) store.Backend {
		b, err := Open(t.Context(), Config{DSN: dsn, CommitPipelines: pipelines, Logger: log})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// TestCrash kills a process writing to the database and checks that every
// acknowledged write survived. The crash child reruns this test and takes
// the database the parent created from its environment, so it creates
// none of its own.
func TestCrash(t *testing.T) {
	var dsn string
	if !storetest.IsChild() {
		dsn = freshDatabase(t)
	}
	storetest.CrashTest(t, storetest.CrashEnv{DSN: dsn, Open: openBackend})
}

// TestSessionSettings checks that a connection of the pool runs with the
// settings the SQL relies on, whatever the DSN asked for.
// TestEvictionOncePerInterval: processes leasing from one database share
// one eviction batch per interval.
func TestEvictionOncePerInterval(t *testing.T) {
	var dsn string
	if !storetest.IsChild() {
		dsn = freshDatabase(t)
	}
	storetest.EvictionOncePerInterval(t, storetest.CrashEnv{DSN: dsn, Open: openBackend})
}

func TestSessionSettings(t *testing.T) {
	dsn := testDSN(t) + "?time_zone=%27%2B02:00%27"
	if strings.Contains(testDSN(t), "?") {
		dsn = testDSN(t) + "&time_zone=%27%2B02:00%27"
	}
	db := rawDB(t, dsn)
	var tz, charset, isolation string
	if err := db.QueryRowContext(t.Context(), "SELECT @@session.time_zone, @@session.character_set_connection").Scan(&tz, &charset); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"@@session.transaction_isolation", "@@session.tx_isolation"} {
		if err := db.QueryRowContext(t.Context(), "SELECT "+v).Scan(&isolation); err == nil {
			break
		}
	}
	if tz != "+00:00" || charset != "utf8mb4" || isolation != "READ-COMMITTED" {
		t.Errorf("session time_zone %q, charset %q, isolation %q; want +00:00, utf8mb4, READ-COMMITTED", tz, charset, isolation)
	}
}

// TestConcurrentOpen opens several backends on a new database at once:
// the migration lock lets one apply the schema while the others wait.
func TestConcurrentOpen(t *testing.T) {
	dsn := freshDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			b, err := Open(t.Context(), Config{DSN: dsn})
			if err == nil {
				err = b.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestParseDSN(t *testing.T) {
	tests := []struct {
		dsn                      string
		user, pass, addr, dbname string
		param, value             string
	}{
		{dsn: "mysql://root@127.0.0.1:3306/test", user: "root", addr: "127.0.0.1:3306", dbname: "test"},
		{dsn: "mysql://u:p%40ss%3Aw@db.example/sluice?readTimeout=5s", user: "u", pass: "p@ss:w", addr: "db.example:3306", dbname: "sluice"},
		{dsn: "mysql://u@[::1]:3307/x?lock_wait_timeout=7", user: "u", addr: "[::1]:3307", dbname: "x", param: "lock_wait_timeout", value: "7"},
		{dsn: "u:pw@tcp(10.0.0.1:3306)/q?sql_mode=%27STRICT_ALL_TABLES%27", user: "u", pass: "pw", addr: "10.0.0.1:3306", dbname: "q", param: "sql_mode", value: "'STRICT_ALL_TABLES'"},
	}
	for _, tc := range tests {
		dc, err := parseDSN(tc.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.dsn, err)
			continue
		}
		if dc.User != tc.user || dc.Passwd != tc.pass || dc.Addr != tc.addr || dc.DBName != tc.dbname {
			t.Errorf("parseDSN(%q) = user %q pass %q addr %q db %q, want %q %q %q %q",
				tc.dsn, dc.User, dc.Passwd, dc.Addr, dc.DBName, tc.user, tc.pass, tc.addr, tc.dbname)
		}
		if tc.param != "" && dc.Params[tc.param] != tc.value {
			t.Errorf("parseDSN(%q): param %s = %q, want %q", tc.dsn, tc.param, dc.Params[tc.param], tc.value)
		}
	}
	for _, bad := range []string{"", "mysql://root@127.0.0.1:3306", "mysql://root@127.0.0.1:3306/", "mysql://root@host/a/b", "no-slash"} {
		if _, err := parseDSN(bad); err == nil {
			t.Errorf("parseDSN(%q) succeeded, want an error", bad)
		}
	}
}

func TestForceSettings(t *testing.T) {
	dc, err := parseDSN("mysql://u@h/db?parseTime=true&clientFoundRows=true&interpolateParams=false&charset=latin1&maxAllowedPacket=1024&tx_isolation=%27SERIALIZABLE%27")
	if err != nil {
		t.Fatal(err)
	}
	if err := forceSettings(dc); err != nil {
		t.Fatal(err)
	}
	if dc.ParseTime || dc.ClientFoundRows || !dc.InterpolateParams || dc.MaxAllowedPacket < minAllowedPacket {
		t.Errorf("settings not forced: %+v", dc)
	}
	if dc.Params["time_zone"] != "'+00:00'" || dc.Params["tx_isolation"] != "" {
		t.Errorf("params not forced: %v", dc.Params)
	}
	if dc.Collation != "utf8mb4_general_ci" {
		t.Errorf("collation %q, want utf8mb4_general_ci", dc.Collation)
	}
}

func TestClassify(t *testing.T) {
	cases := map[uint16]error{1213: engine.ErrRetry, 1205: engine.ErrRetry, 1062: engine.ErrDuplicate, 1146: nil}
	for num, want := range cases {
		if got := classify(&driver.MySQLError{Number: num}); got != want {
			t.Errorf("classify(%d) = %v, want %v", num, got, want)
		}
	}
	if got := classify(sql.ErrNoRows); got != nil {
		t.Errorf("classify(ErrNoRows) = %v, want nil", got)
	}
	// A connection lost once a request may have gone out, and the
	// failures that prove nothing was sent.
	for _, c := range []struct {
		err  error
		want error
	}{
		{driver.ErrInvalidConn, engine.ErrNoReply},
		{fmt.Errorf("x: %w", driver.ErrPktSync), engine.ErrNoReply},
		{&net.OpError{Op: "write", Err: syscall.ECONNRESET}, engine.ErrNoReply},
		{sqldriver.ErrBadConn, nil},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, nil},
		{context.Canceled, nil},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestLargestBatch enqueues and appends the largest batch the default
// limits allow, 16 messages of 1 MiB, to check that no statement exceeds a
// packet limit, and reads the payloads back intact.
func TestLargestBatch(t *testing.T) {
	b := openBackend(t, freshDatabase(t))
	ctx := t.Context()
	st, err := b.Store(store.Tenant{Service: "svc", Provider: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateQueue(ctx, &store.QueueSettings{Name: "big"}); err != nil {
		t.Fatal(err)
	}
	n := store.DefaultMaxBatchBytes / store.DefaultMaxMessageBytes
	ms := make([]store.NewMessage, n)
	rs := make([]store.NewRecord, n)
	for i := range ms {
		p := make([]byte, store.DefaultMaxMessageBytes-64)
		rand.Read(p)
		ms[i] = store.NewMessage{Payload: p, Properties: map[string]string{"i": strconv.Itoa(i)}}
		rs[i] = store.NewRecord{Namespace: "ns", Key: "k", Payload: p}
	}
	if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: "big", Messages: ms}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	got, err := st.Lease(ctx, &store.LeaseParams{Queue: "big", Max: n, Visibility: time.Minute})
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if len(got) != n {
		t.Fatalf("leased %d messages, want %d", len(got), n)
	}
	for i, l := range got {
		if !bytes.Equal(l.Payload, ms[i].Payload) || l.Properties["i"] != strconv.Itoa(i) {
			t.Fatalf("message %d came back altered", i)
		}
	}
	if _, err := st.Append(ctx, &store.AppendParams{Partition: 0, Records: rs}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	recs, err := st.Read(ctx, &store.ReadParams{Partition: 0, Max: n})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(recs) != n || !bytes.Equal(recs[n-1].Payload, rs[n-1].Payload) {
		t.Fatalf("read %d records back, want %d intact", len(recs), n)
	}
}

// rawDB opens a plain pool with the settings Open forces on every
// connection, closed when the test ends.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	dc, err := connConfig(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := driver.NewConnector(dc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestPacketLimit checks that Open refuses limits the server's
// max_allowed_packet cannot carry, naming the setting, rather than
// failing each large enqueue later.
func TestPacketLimit(t *testing.T) {
	dsn := freshDatabase(t)
	var max int64
	if err := rawDB(t, dsn).QueryRowContext(t.Context(), "SELECT @@max_allowed_packet").Scan(&max); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), Config{DSN: dsn, Limits: store.Limits{MaxMessageBytes: int(max / 2)}})
	if err == nil || !strings.Contains(err.Error(), "max_allowed_packet") {
		t.Fatalf("Open with MaxMessageBytes %d under a %d-byte packet limit: got %v, want an error naming max_allowed_packet", max/2, max, err)
	}
	b, err := Open(t.Context(), Config{DSN: dsn, Limits: store.Limits{MaxMessageBytes: int(max/2) - statementOverhead}})
	if err != nil {
		t.Fatalf("Open with the largest limit the server carries: %v", err)
	}
	b.Close()
}

// A client paused inside a transaction that holds partitions' checkpoint
// rows (creating a subscription, saving, trimming) holds up saves, not
// the leases of any node.
func TestLeasesBesideDataLocks(t *testing.T) {
	dsn := freshDatabase(t)
	b := openBackend(t, dsn)
	storetest.LeasesBesideDataLocks(t, b, func(ctx context.Context, tn store.Tenant) (func(), error) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return nil, err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err == nil {
			_, err = tx.ExecContext(ctx, "SELECT 1 FROM sluice_partition_checkpoints WHERE service = ? AND provider = ? FOR UPDATE",
				tn.Service, tn.Provider)
		}
		if err != nil {
			db.Close()
			return nil, err
		}
		return func() {
			tx.Rollback()
			db.Close()
		}, nil
	})
}

// A nil *DBConfig is all defaults: OpenDB opens a backend on the
// application's pool, and closing it leaves the pool open.
func TestOpenDBNilConfig(t *testing.T) {
	db := rawDB(t, freshDatabase(t))
	b, err := OpenDB(t.Context(), db, nil)
	if err != nil {
		t.Fatalf("OpenDB with a nil config: %v", err)
	}
	s, err := b.Store(store.Tenant{Service: "nil", Provider: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateQueue(t.Context(), &store.QueueSettings{Name: "q"}); err != nil {
		t.Errorf("CreateQueue: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := db.PingContext(t.Context()); err != nil {
		t.Errorf("the pool after the backend closed: %v", err)
	}
}
