package sluice_test

import (
	"os/exec"
	"strings"
	"testing"
)

// sqlDrivers are the module paths of the SQL drivers the backends link.
var sqlDrivers = []string{
	"modernc.org/sqlite",
	"github.com/jackc/pgx",
	"github.com/go-sql-driver/mysql",
	"github.com/mattn/go-sqlite3",
	"github.com/ncruces",
}

// TestRootLinksNoDriver: a program links only the backends it imports.
// Neither the library's root package nor the network client depends on
// a SQL driver, nor on a backend package.
func TestRootLinksNoDriver(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{".", "./client", "./sluicetype", "./store"} {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, d := range sqlDrivers {
				if strings.HasPrefix(dep, d) {
					t.Errorf("%s depends on the SQL driver %s", pkg, dep)
				}
			}
			if strings.HasPrefix(dep, "github.com/sluicehq/sluice/store/") && !strings.HasPrefix(dep, "github.com/sluicehq/sluice/store/internal") {
				t.Errorf("%s depends on the backend %s", pkg, dep)
			}
		}
	}
}

// TestModuleLacksMeasurementDrivers: the SQLite drivers sluice was only
// measured against live in the module store/sqlite/sqlitedrivers, so
// that no program building sluice's module downloads or links them.
func TestModuleLacksMeasurementDrivers(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		mod, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if mod == "github.com/mattn/go-sqlite3" || strings.HasPrefix(mod, "github.com/ncruces/go-sqlite3") {
			t.Errorf("sluice's module requires %s: it belongs in store/sqlite/sqlitedrivers's go.mod", mod)
		}
	}
}
