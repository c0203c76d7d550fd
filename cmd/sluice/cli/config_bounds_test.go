package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A negative bound, from the file, the environment or a flag, is refused
// by name, where it used to take the default silently; zero still takes
// the default.
func TestServeConfigNegativeBounds(t *testing.T) {
	file := func(body string) string {
		p := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string // "" when valid
	}{
		{nil, []string{"--config", file(`{"max_request_bytes": -1}`)}, "max_request_bytes"},
		{nil, []string{"--config", file(`{"max_receive_wait": "-1s"}`)}, "max_receive_wait"},
		{nil, []string{"--config", file(`{"max_consumers": -5}`)}, "max_consumers"},
		{nil, []string{"--config", file(`{"stream_partitions": -1}`)}, "stream_partitions"},
		{map[string]string{"SLUICE_MAX_RECEIVE_WAIT": "-1ms"}, nil, "max_receive_wait"},
		{map[string]string{"SLUICE_MAX_REQUEST_BYTES": "-1"}, nil, "max_request_bytes"},
		{nil, []string{"--stream-partitions", "-1"}, "stream_partitions"},
		{nil, []string{"--config", file(`{"max_request_bytes": 0, "max_receive_wait": "0s", "max_consumers": 0, "stream_partitions": 0}`)}, ""},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		// A negative duration is refused as it is read (the file's names
		// the value, "-1s"); other bounds when the configuration is
		// checked.
		cfg, err := loadServeConfig(fs, c.args, func(k string) string { return c.env[k] })
		if err == nil {
			err = cfg.validate()
		} else if c.want != "" && strings.Contains(err.Error(), "must not be negative") {
			continue
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v %v: %v", c.env, c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v %v: %v, want an error about %s", c.env, c.args, err, c.want)
		}
	}
}
