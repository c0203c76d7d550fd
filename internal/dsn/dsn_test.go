package dsn

import (
	"strings"
	"testing"
)

// Redact masks the credentials of every form of DSN sluice takes, and
// leaves SQLite paths as they are.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// PostgreSQL URLs.
		{"postgres://user:secret@db:5432/sluice?sslmode=disable", "postgres://user:xxxxx@db:5432/sluice?sslmode=disable"},
		{"postgresql://user:secret@db/sluice", "postgresql://user:xxxxx@db/sluice"},
		{"postgres://user@db/sluice", "postgres://user@db/sluice"},
		{"postgres://db/sluice", "postgres://db/sluice"},
		{"postgres://user:s%40cr%2Fet@db/sluice", "postgres://user:xxxxx@db/sluice"},
		{"postgres://user:sec@ret@db/sluice", "postgres://user:xxxxx@db/sluice"},
		{"postgres://user:sec/ret@db/sluice", "postgres://user:xxxxx@db/sluice"},
		{"postgres://user:123/ret@db/sluice", "postgres://user:xxxxx@db/sluice"},
		{"postgres://user:se?cret@db/sluice", "postgres://user:xxxxx@db/sluice"},
		{"postgres://user:secret@h1:5432,h2:5432/sluice", "postgres://user:xxxxx@h1:5432,h2:5432/sluice"},
		{"postgres://db/sluice?user=u&password=secret&sslmode=require", "postgres://db/sluice?user=u&password=xxxxx&sslmode=require"},
		{"postgres://u:p1@db/sluice?sslpassword=secret", "postgres://u:xxxxx@db/sluice?sslpassword=xxxxx"},
		// libpq keyword/value DSNs.
		{"host=db user=u password=secret dbname=sluice", "host=db user=u password=xxxxx dbname=sluice"},
		{"host=db password='se cret \\' x' dbname=sluice", "host=db password=xxxxx dbname=sluice"},
		{"host=db password = secret", "host=db password = xxxxx"},
		{"password=secret", "password=xxxxx"},
		{"host=db sslpassword=secret", "host=db sslpassword=xxxxx"},
		{"host=db user=u dbname=sluice", "host=db user=u dbname=sluice"},
		// MariaDB and MySQL: URLs and the driver's form.
		{"mysql://root:secret@127.0.0.1:3306/test", "mysql://root:xxxxx@127.0.0.1:3306/test"},
		{"mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
		{"mysql://root:se/cr@et@db:3306/test?parseTime=true", "mysql://root:xxxxx@db:3306/test?parseTime=true"},
		{"root:secret@tcp(127.0.0.1:3306)/test?parseTime=true", "root:xxxxx@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"root:se@c/ret@tcp(db:3306)/test", "root:xxxxx@tcp(db:3306)/test"},
		{"root:secret@/test", "root:xxxxx@/test"},
		{"root@unix(/run/mysqld.sock)/test", "root@unix(/run/mysqld.sock)/test"},
		// SQLite paths.
		{"sqlite://sluice-data/sluice.db", "sqlite://sluice-data/sluice.db"},
		{"sqlite:///var/lib/sluice/sluice.db", "sqlite:///var/lib/sluice/sluice.db"},
		{"file:sluice.db?cache=shared", "file:sluice.db?cache=shared"},
		{"sluice-data/sluice.db", "sluice-data/sluice.db"},
		{"/var/lib/sluice:2026/sluice.db", "/var/lib/sluice:2026/sluice.db"},
		// Other schemes (a typo) still hide a password.
		{"postgress://user:secret@db/sluice", "postgress://user:xxxxx@db/sluice"},
	} {
		got := Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, secret := range []string{"secret", "cret", "sec/ret", "123/ret"} {
			if strings.Contains(tc.in, secret) && strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q: shows %q", tc.in, got, secret)
			}
		}
	}
}
