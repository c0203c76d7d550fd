package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	"golang.org/x/time/rate"
)

// How often the server logs refusals, and the errors of its HTTP server
// (TLS handshakes that fail, malformed requests): a burst of
// refusalLogBurst, then one each refusalLogEvery; the records dropped
// meanwhile are counted in the next one ("suppressed"). An
// unauthenticated peer cannot flood the log.
const (
	refusalLogBurst = 10
	refusalLogEvery = time.Second
)

// logLimiter bounds the rate of a kind of log record.
type logLimiter struct {
	lim        *rate.Limiter
	suppressed atomic.Int64
}

func newLogLimiter() *logLimiter {
	return &logLimiter{lim: rate.NewLimiter(rate.Every(refusalLogEvery), refusalLogBurst)}
}

// allow reports whether a record may be logged now, and how many were
// not since the last that was.
func (l *logLimiter) allow() (suppressed int64, ok bool) {
	if !l.lim.Allow() {
		l.suppressed.Add(1)
		return 0, false
	}
	return l.suppressed.Swap(0), true
}

// refused logs a call's refusal at WARN, at a bounded rate, with the
// peer's address, the procedure, the key's name when the call named one
// (never its token) and the refusal; it returns err.
func (s *Server) refused(ctx context.Context, k *authKey, err error) error {
	n, ok := s.refusals.allow()
	if !ok {
		return err
	}
	attrs := []any{"code", connect.CodeOf(err).String()}
	if info, ok := connect.CallInfoForServerContext(ctx); ok {
		attrs = append(attrs, "procedure", info.Spec.Procedure, "peer", info.PeerAddr)
	}
	if k != nil {
		attrs = append(attrs, "key", k.Name)
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		attrs = append(attrs, "err", ce.Message())
	}
	if n > 0 {
		attrs = append(attrs, "suppressed", n)
	}
	s.log.Warn("sluice: server: call refused", attrs...)
	return err
}

// refusedHTTP logs, as refused does, a refused request outside the API
// (/metrics).
func (s *Server) refusedHTTP(r *http.Request, k *authKey, err error) {
	n, ok := s.refusals.allow()
	if !ok {
		return
	}
	attrs := []any{"code", connect.CodeOf(err).String(), "path", r.URL.Path, "peer", r.RemoteAddr}
	if k != nil {
		attrs = append(attrs, "key", k.Name)
	}
	attrs = append(attrs, "err", errMessage(err))
	if n > 0 {
		attrs = append(attrs, "suppressed", n)
	}
	s.log.Warn("sluice: server: request refused", attrs...)
}

// errMessage is a connect error's message without its code.
func errMessage(err error) string {
	if ce := (*connect.Error)(nil); errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// httpStatus is the HTTP status of a refusal's code.
func httpStatus(c connect.Code) int {
	switch c {
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}

// refusedConn logs, as refused does, a connection closed at once for
// being one too many.
func (s *Server) refusedConn(peer net.Addr) {
	n, ok := s.refusals.allow()
	if !ok {
		return
	}
	attrs := []any{"peer", peer.String(), "max_connections", s.cfg.MaxConnections}
	if n > 0 {
		attrs = append(attrs, "suppressed", n)
	}
	s.log.Warn("sluice: server: connection refused: the server holds as many as it may", attrs...)
}

// errorLog is the HTTP server's ErrorLog output: each line a WARN record,
// at a bounded rate.
type errorLog struct{ s *Server }

func (e errorLog) Write(p []byte) (int, error) {
	if n, ok := e.s.netErrors.allow(); ok {
		attrs := []any{}
		if n > 0 {
			attrs = append(attrs, "suppressed", n)
		}
		e.s.log.Log(context.Background(), slog.LevelWarn, "sluice: server: "+strings.TrimSpace(string(p)), attrs...)
	}
	return len(p), nil
}
