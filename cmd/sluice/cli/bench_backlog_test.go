package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchBacklogBuild runs the backlog scenario built through the store
// (TestBenchScenarios runs the default, through a Receiver) and checks
// that an unknown way of building it is refused before anything opens.
func TestBenchBacklogBuild(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	code, out, errOut := run(t, "bench", "--db", db, "--scenario", "backlog", "--json", "--inflight", "300",
		"--backlog-build", "lease", "--sqlite-synchronous", "NORMAL")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d result lines, want 2:\n%s", len(lines), out)
	}
	for i, line := range lines {
		var r struct {
			Inflight int    `json:"inflight"`
			Count    int    `json:"count"`
			Note     string `json:"note"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.Inflight != []int{0, 300}[i] || r.Count != 6400 || !strings.Contains(r.Note, "lease of 32") {
			t.Errorf("line %d: %s", i, line)
		}
	}
	code, _, errOut = run(t, "bench", "--db", db, "--scenario", "backlog", "--backlog-build", "peek")
	if code != ExitUsage || !strings.Contains(errOut, "--backlog-build") {
		t.Errorf("--backlog-build peek: exit %d, stderr %q", code, errOut)
	}
}
