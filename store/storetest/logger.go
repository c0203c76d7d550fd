package storetest

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// Logger returns a logger that writes to t.Log, so a backend's warnings
// appear beside the test that caused them (and only when it fails or runs
// with -v).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = tlogWriter{}
