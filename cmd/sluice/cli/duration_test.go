package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
)

// Durations of the configuration file, the environment and the flags
// follow sluice's rule: negative refused, too long saturated to Forever.
func TestParseDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"0", 0, ""},
		{"1ns", time.Nanosecond, ""},
		{"90s", 90 * time.Second, ""},
		{"2562047h47m16.854775807s", sluice.Forever, ""},
		{"3000000h", sluice.Forever, ""},
		{"87660000h", sluice.Forever, ""},
		{"-1s", 0, "negative"},
		{"-3000000h", 0, "negative"},
		{"soon", 0, "like"},
		{"10", 0, "like"},
	} {
		got, err := parseDuration(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseDuration(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestServeConfigDurations(t *testing.T) {
	t.Parallel()
	load := func(file string, env map[string]string, args ...string) error {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if file != "" {
			path := filepath.Join(t.TempDir(), "sluice.json")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			env = map[string]string{"SLUICE_CONFIG": path}
		}
		_, err := loadServeConfig(fs, args, func(k string) string { return env[k] })
		return err
	}
	for what, err := range map[string]error{
		"file":        load(`{"max_receive_wait": "-5s"}`, nil),
		"environment": load("", map[string]string{"SLUICE_MAX_RECEIVE_WAIT": "-5s"}),
		"flag":        load("", nil, "--max-receive-wait", "-5s"),
	} {
		if err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("a negative max receive wait from the %s: %v, want it refused", what, err)
		}
	}
	if err := load(`{"max_receive_wait": "3000000h"}`, nil); err != nil {
		t.Errorf("a max receive wait too long for time.Duration: %v, want it saturated", err)
	}
	var ttl time.Duration
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*durationValue)(&ttl), "ttl", "")
	if err := fs.Parse([]string{"--ttl", "-1s"}); err == nil {
		t.Errorf("--ttl -1s accepted")
	}
}

// --json writes durations exactly as the API's JSON does.
func TestFormatDurationIsTheAPIs(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, time.Microsecond, 250 * time.Millisecond, time.Second, 60 * time.Second,
		90*time.Minute + 1500*time.Microsecond, 1234567891, sluice.Forever, -time.Second, -1500 * time.Millisecond} {
		b, err := protojson.Marshal(durationpb.New(d))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := formatDuration(d), strings.Trim(string(b), `"`); got != want {
			t.Errorf("formatDuration(%v) = %q, the API writes %q", d, got, want)
		}
	}
}
