package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary runs as sluice itself when told to, so that a test can
// signal a real process.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// sluice serve shuts down cleanly on SIGTERM and on SIGINT, and exits 0.
func TestServeSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "serve", "--db", filepath.Join(t.TempDir(), "serve.db"), "--addr", "127.0.0.1:0",
				"--self-check=false")
			cmd.Env = append(os.Environ(), "SLUICE_TEST_RUN_MAIN=1")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			lines := bufio.NewScanner(stdout)
			serving := false
			for !serving && lines.Scan() {
				out.WriteString(lines.Text() + "\n")
				serving = strings.Contains(lines.Text(), "on http://127.0.0.1:")
			}
			if !serving {
				cmd.Process.Kill()
				t.Fatalf("serve did not start:\n%s", out.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				for lines.Scan() {
					out.WriteString(lines.Text() + "\n")
				}
				done <- cmd.Wait()
			}()
			select {
			case err := <-done:
				if err != nil || !strings.Contains(out.String(), "shutting down") {
					t.Fatalf("serve after %v: %v\n%s", sig, err, out.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("serve did not stop on %v:\n%s", sig, out.String())
			}
		})
	}
}
