package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// The processor scenario's steady mode sends while the processors drain
// and reports the messages they handled, with a prefetch budget.
func TestBenchProcessorSteady(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	code, out, errOut := run(t, "bench", "--db", db, "--scenario", "processor", "--steady", "--prefetch", "8", "--json",
		"--producers", "2", "--consumers", "1", "--lease-batch", "4", "--duration", "300ms", "--sqlite-synchronous", "NORMAL")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r["producers"] != 2.0 || r["consumers"] != 1.0 || r["count"].(float64) < 1 ||
		!strings.Contains(r["note"].(string), "steady") || !strings.Contains(r["note"].(string), "prefetch 8") {
		t.Errorf("result %v: want the steady run's counts, with its prefetch noted", r)
	}
	if code, _, errOut := run(t, "bench", "--db", db, "--scenario", "processor", "--steady", "--producers", "0"); code == ExitOK {
		t.Errorf("--steady with no producer: exit %d, want a failure (%s)", code, errOut)
	}
}
