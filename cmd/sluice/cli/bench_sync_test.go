package cli

import "testing"

// bench's --sqlite-synchronous reaches a SQLite DSN as its parameter,
// unless the DSN names one (on any driver's scheme); other databases'
// DSNs are left alone.
func TestSQLiteSynchronous(t *testing.T) {
	for _, tc := range []struct{ dsn, sync, want string }{
		{"a.db", "NORMAL", "a.db?synchronous=NORMAL"},
		{"sqlite://a.db", "FULL", "sqlite://a.db?synchronous=FULL"},
		{"sqlite://a.db?synchronous=FULL", "NORMAL", "sqlite://a.db?synchronous=FULL"},
		{"sqlite://a.db", "", "sqlite://a.db"},
		{"sqlite-mattn:///tmp/a.db", "NORMAL", "sqlite-mattn:///tmp/a.db?synchronous=NORMAL"},
		{"postgres://h/db?sslmode=disable", "NORMAL", "postgres://h/db?sslmode=disable"},
		{"mysql://root@h/db", "NORMAL", "mysql://root@h/db"},
	} {
		if got := sqliteSynchronous(tc.dsn, tc.sync); got != tc.want {
			t.Errorf("sqliteSynchronous(%q, %q) = %q, want %q", tc.dsn, tc.sync, got, tc.want)
		}
	}
}
