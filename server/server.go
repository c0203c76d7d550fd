// Package server is sluice's network server, embeddable in any program:
// the gRPC and HTTP/JSON API (Connect, gRPC and gRPC-Web from one port,
// defined in proto/sluice/v1), health and readiness endpoints, with API
// keys, per-key rate limits and request size limits. `sluice serve` is a
// thin wrapper around it.
//
//	srv, err := server.New(server.Config{Client: c, Addr: "127.0.0.1:7070"})
//	if err := srv.Start(ctx); err != nil { ... }
//	<-srv.Ready()
//	...
//	srv.Shutdown(ctx)
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/connect/v2/connectproto"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api/sluice/v1/sluicev1connect"
	"github.com/sluicehq/sluice/internal/apierr"
	"github.com/sluicehq/sluice/server/dashboard"
	"github.com/sluicehq/sluice/server/internal/sqs"
)

// Config configures a server. Zero fields take their defaults.
type Config struct {
	// Client is the library client the server serves (required); the
	// server does not close it.
	Client *sluice.Client
	// Addr is the address to listen on (default 127.0.0.1:7070).
	Addr string
	// Keys authenticate calls; without keys every call is allowed, which
	// New refuses on a non-loopback address unless Insecure is set, and
	// the server answers only requests to a loopback host (Start's and
	// Handler's alike) unless Insecure is set. Keys on a non-loopback
	// address without TLS start with a warning: tokens travel in clear.
	Keys     []Key
	Insecure bool
	// TLS, when set, serves HTTPS (HTTP/2 through ALPN); otherwise plain
	// HTTP/1.1 and HTTP/2 without TLS (h2c, for gRPC clients).
	TLS *tls.Config
	// MaxRequestBytes bounds a call's request message (default 16 MiB):
	// a larger one fails with RESOURCE_EXHAUSTED before it is decoded.
	MaxRequestBytes int
	// MaxReceiveWait caps how long a receive or an accept waits for
	// messages (default 60 s).
	MaxReceiveWait time.Duration
	// StreamNodes configures the stream nodes the server runs for
	// Consume calls, one per consumer with streams open on it (Name and
	// Group are set per consumer; Address defaults to the server's).
	StreamNodes sluice.StreamProcessorOptions
	// SubscriptionLagMetrics adds a series per stream subscription and
	// partition to /metrics (sluice_stream_subscription_lag); without it
	// lag is summed per consumer and namespace, whose series stay few
	// however many streams are subscribed to.
	SubscriptionLagMetrics bool
	// MaxConsumers bounds the consumers with Consume streams open on the
	// server at once, each of which runs a stream node (default 256): a
	// Consume for one more fails with RESOURCE_EXHAUSTED.
	MaxConsumers int
	// MaxStreams bounds the Consume and Tail streams open on the server at
	// once, whatever their keys (default 4,096): one more fails with
	// RESOURCE_EXHAUSTED. Each key has a bound of its own too
	// (Key.MaxStreams).
	MaxStreams int
	// ReadTimeout bounds the time to read a request: its headers and its
	// message (default 30 s). A client slower than that gets its
	// connection closed. It bounds reading the request, not the call: a
	// receive that waits, a Consume or a Tail stream lasts as long as it
	// needs once its request is read. Start applies it; a program that
	// serves Handler itself sets its own http.Server's timeouts.
	ReadTimeout time.Duration
	// MaxConnections bounds the connections open to Start's listener at
	// once (default 8,192): one more is closed as soon as it is accepted.
	// Each key has a bound of its own (Key.MaxConnections), counted from
	// the key's first call on a connection.
	MaxConnections int
	// Heartbeat is how long a Consume or Tail stream stays silent before
	// the server sends a heartbeat (default 15 s, at least 100 ms), so
	// that proxies keep it
	// open and clients can tell a silent stream from a broken one.
	Heartbeat time.Duration
	// HistoryInterval is how often the server samples each queue's and
	// subscription's counts, its own rates of messages per entity and the
	// stream lag, for StatsService's history (GetEntityHistory,
	// GetStreamLagHistory) and the dashboard's charts (default 10 s, from
	// 100 ms to 5 min; zero or negative: the default), the first one
	// interval after Start. A sample reads every entity's counts and the
	// cluster's status, unless a scrape of /metrics read them within half
	// an interval (scrapes at least every half interval cost the history
	// nothing; its own reads serve only it, so scrapes stay fresh). The
	// history holds an hour of samples, or 360 when the interval is
	// shorter than 10 s, for up to 1,000 entities (the first in name
	// order), 1,000 consumers in namespaces and 1,000 stream
	// subscriptions (those lagging most): about 38 MB at most.
	HistoryInterval time.Duration
	// SQSAddr, when set, is an address on which the server also serves
	// Amazon SQS's JSON protocol on the client's queues (default: none),
	// so that code written with an AWS SDK runs on sluice: requests are
	// signed (AWS Signature Version 4) with a key's Name as the access
	// key id and its Token as the secret, and the key's grants, rate
	// limit and MaxWaits apply. Without keys it is held to loopback as
	// Addr is. docs/architecture.md, "SQS on sluice", maps the
	// operations.
	SQSAddr string
	// Logger receives the server's logs (default: none).
	Logger *slog.Logger
	// TracerProvider, when set, traces every API call with a server span
	// (see EntityAttribute for what a span carries), continuing the trace
	// of a call that carries a traceparent header, and, when Client has
	// no Instrumentation of its own, instruments it with package
	// sluiceotel on the same provider, so that the storage operation of a
	// call gets a span under the call's (see the notes on tracing in
	// tracing.go). Nil, the default, traces nothing and costs nothing.
	// The server does not shut the provider down: its owner flushes it
	// after Shutdown.
	TracerProvider trace.TracerProvider
}

// Defaults.
const (
	DefaultAddr            = "127.0.0.1:7070"
	DefaultMaxRequestBytes = 16 << 20
	DefaultMaxReceiveWait  = 60 * time.Second
	DefaultMaxConsumers    = 256
	DefaultHeartbeat       = 15 * time.Second
	DefaultMaxStreams      = 4096
	// minHeartbeat bounds Heartbeat from below: shorter would be pings,
	// not heartbeats.
	minHeartbeat = 100 * time.Millisecond
	// DefaultKeyMaxStreams bounds the Consume and Tail streams open with
	// one key at once, unless the key says otherwise.
	DefaultKeyMaxStreams = 64
	// DefaultKeyMaxWaits bounds the calls waiting with one key at once.
	DefaultKeyMaxWaits = 1024
	// DefaultReadTimeout bounds the time to read a request.
	DefaultReadTimeout = 30 * time.Second
	// DefaultMaxConnections bounds the connections open at once.
	DefaultMaxConnections = 8192
	// DefaultKeyMaxConnections bounds the connections open with one key's
	// calls at once, unless the key says otherwise.
	DefaultKeyMaxConnections = 512
	// maxReadHeaderTimeout bounds the time to read a request's headers
	// when ReadTimeout is longer.
	maxReadHeaderTimeout = 10 * time.Second
)

// Server serves the API for one library client.
type Server struct {
	cfg  Config
	c    *sluice.Client
	keys *keyring
	log  *slog.Logger
	mux  *http.ServeMux
	// handler is mux behind the loopback Host guard when the server has
	// no keys (and is not Insecure): what Start serves and Handler returns.
	handler http.Handler
	m       *metrics
	tp      throughput
	// hist samples the entities' counts, this server's rates per entity
	// and the stream lag, for StatsService's history.
	hist *history
	// health checks the database for /readyz.
	health readiness
	// streams serves StreamService and runs the consumers of its
	// Consume calls.
	streams *streams

	// interceptors wrap every call of the API, the first outermost.
	interceptors []connect.ServerInterceptor

	// refusals and netErrors bound the rate of the logs of refused calls
	// and connections, and of the HTTP server's errors.
	refusals, netErrors *logLimiter

	// stopping ends when Shutdown begins: waiting receives and accepts
	// return at once, while other calls in progress run to their end.
	stopping context.Context
	stop     context.CancelFunc

	// sqs serves Config.SQSAddr (nil without it), behind sqsHandler's
	// guards.
	sqs        *sqs.Handler
	sqsHandler http.Handler

	mu          sync.Mutex
	http        *http.Server
	listener    net.Listener
	sqsHTTP     *http.Server
	sqsListener net.Listener
	ready       chan struct{}
	done        chan error
	sampled     chan struct{} // closed when the throughput and history samplers end
}

// New returns a server; Start starts it.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("sluice: server: no client (open one with sluice.Open)")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxReceiveWait <= 0 {
		cfg.MaxReceiveWait = DefaultMaxReceiveWait
	}
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = DefaultMaxConsumers
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	cfg.Heartbeat = max(cfg.Heartbeat, minHeartbeat)
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.HistoryInterval <= 0 {
		cfg.HistoryInterval = DefaultHistoryInterval
	}
	cfg.HistoryInterval = min(max(cfg.HistoryInterval, minHistoryInterval), maxHistoryInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	keys, err := newKeyring(cfg.Keys, cfg.MaxConsumers)
	if err != nil {
		return nil, fmt.Errorf("sluice: server: %w", err)
	}
	if keys == nil && !cfg.Insecure {
		for _, addr := range []string{cfg.Addr, cfg.SQSAddr} {
			if addr == "" {
				continue
			}
			if loopback, err := isLoopback(addr); err != nil {
				return nil, fmt.Errorf("sluice: server: address %q: %w", addr, err)
			} else if !loopback {
				return nil, fmt.Errorf("sluice: server: refusing to listen on %s without authentication: configure API keys, "+
					"listen on a loopback address, or accept the risk with --insecure", addr)
			}
		}
	}
	stopping, stop := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, c: cfg.Client, keys: keys, log: cfg.Logger, stopping: stopping, stop: stop,
		ready: make(chan struct{}), done: make(chan error, 1), refusals: newLogLimiter(), netErrors: newLogLimiter()}
	s.m = newMetrics(s)
	s.hist = newHistory(cfg.HistoryInterval, s.m.x.Snapshot)
	s.m.feed(s.hist, s.c)
	s.streams = newStreams(s)
	if cfg.TracerProvider != nil {
		tracing, err := newTracing(cfg.TracerProvider)
		if err != nil {
			s.m.close()
			return nil, fmt.Errorf("sluice: server: tracing: %w", err)
		}
		s.interceptors = append(s.interceptors, tracing)
		traceClient(s.c, cfg.TracerProvider)
	}
	s.interceptors = append(s.interceptors, s.m.observe, s.recoverPanics, s.authenticate)
	s.mux = s.routes()
	s.handler = withHTTPCall(s.mux)
	if cfg.SQSAddr != "" {
		if s.sqs, s.sqsHandler, err = s.newSQS(); err != nil {
			s.m.close()
			return nil, fmt.Errorf("sluice: server: sqs: %w", err)
		}
	}
	if s.keys == nil && !s.cfg.Insecure {
		listenHost, _, _ := net.SplitHostPort(s.cfg.Addr)
		s.handler = loopbackHostsOnly(s.handler, listenHost)
	}
	return s, nil
}

// isLoopback reports whether addr's host is a loopback address, or a
// name that resolves only to loopback ones (localhost).
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil // every interface
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// routes mounts the API services and the operational endpoints.
func (s *Server) routes() *http.ServeMux {
	api := connect.NewServer(s.interceptors...)
	sluicev1connect.RegisterEntityServiceHandler(api, &entities{s})
	sluicev1connect.RegisterMessagingServiceHandler(api, &messaging{s})
	sluicev1connect.RegisterClusterServiceHandler(api, &cluster{s})
	sluicev1connect.RegisterStatsServiceHandler(api, &stats{s})
	sluicev1connect.RegisterStreamServiceHandler(api, s.streams)
	// JSON requests with fields the API does not define are refused, not
	// silently dropped: a misspelt field would otherwise change nothing.
	strict := connectproto.NewJSONCodec()
	strict.UnmarshalOptions.DiscardUnknown = false
	mux := http.NewServeMux()
	connecthttp.Mount(mux, api,
		connecthttp.WithReadMaxBytes(s.cfg.MaxRequestBytes),
		connecthttp.WithCodecs(connectproto.NewBinaryCodec(), strict))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.m.handler(s))
	dashboard.Mount(mux)
	return mux
}

// loopbackHostsOnly refuses requests whose Host is not a loopback name
// or address, or the name the server listens on (which resolves only to
// loopback addresses). A server without keys listens on loopback only,
// and a web page must not reach it by pointing a name of its own at
// 127.0.0.1 (DNS rebinding): the page's requests carry that name.
func loopbackHostsOnly(next http.Handler, listenHost string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
		ip := net.ParseIP(host)
		if !(ip != nil && ip.IsLoopback() || strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") ||
			listenHost != "" && strings.EqualFold(host, strings.TrimSuffix(listenHost, "."))) {
			http.Error(w, "sluice: this server has no API keys and answers only requests to a loopback host "+
				"(localhost, 127.0.0.1, [::1], or the name it listens on); configure keys, or --insecure (behind a proxy, say), "+
				"to serve other names", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readyz answers 200 once the server listens and its database answers
// (checked at most once a second, however many probes ask). It asks for
// no credentials, so that orchestrators' probes need none.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	select {
	case <-s.ready:
	default:
		http.Error(w, "not listening yet", http.StatusServiceUnavailable)
		return
	}
	if err := s.health.check(s.c, s.log); err != nil {
		http.Error(w, "the database does not answer", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Handler returns the server's HTTP handler: the API, /healthz, /readyz,
// /metrics and the dashboard at /, for a program that serves it itself.
// Without keys (and without Insecure) it answers only requests to a
// loopback host, as Start's server does. The bounds on connections and
// the read timeout are Start's: such a program sets its own. Such a
// program calls Shutdown too once done: it stops the server's
// observation of the client's dead-letterings.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on the configured address and serves in the background
// until Shutdown. Ready is closed once it listens.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return fmt.Errorf("sluice: server: started already")
	}
	l, err := s.listen(ctx, s.cfg.Addr)
	if err != nil {
		return err
	}
	s.http = s.httpServer(s.handler)
	if s.sqs != nil {
		sl, err := s.listen(ctx, s.cfg.SQSAddr)
		if err != nil {
			l.Close()
			return err
		}
		s.sqsHTTP, s.sqsListener = s.httpServer(s.sqsHandler), sl
	}
	s.listener = l
	s.sampled = make(chan struct{})
	var samplers sync.WaitGroup
	samplers.Go(func() { s.tp.run(s.stopping) })
	samplers.Go(func() { s.hist.run(s.stopping) })
	go func() {
		samplers.Wait()
		close(s.sampled)
	}()
	close(s.ready)
	go func() {
		err := s.http.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	if s.sqsHTTP != nil {
		go func() {
			if err := s.sqsHTTP.Serve(s.sqsListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("sluice: server: the SQS endpoint stopped", "err", err)
			}
		}()
		s.log.Info("sluice: server: SQS endpoint listening", "addr", s.sqsListener.Addr().String())
	}
	s.log.Info("sluice: server listening", "addr", l.Addr().String(), "tls", s.cfg.TLS != nil, "auth", s.keys != nil)
	if s.keys != nil && s.cfg.TLS == nil {
		if loopback, err := isLoopback(s.cfg.Addr); err == nil && !loopback {
			s.log.Warn("sluice: server: API keys over plain HTTP on a non-loopback address: tokens travel in clear; "+
				"serve TLS (--tls-cert and --tls-key) or terminate TLS in a proxy in front", "addr", l.Addr().String())
		}
	}
	return nil
}

// listen listens on addr as Start does: with TCP keepalives and user
// timeouts, MaxConnections and TLS.
func (s *Server) listen(ctx context.Context, addr string) (net.Listener, error) {
	// A peer that vanished is found out within about half a minute:
	// keepalives on an idle connection, a bound on unacknowledged data
	// on a busy one (Linux).
	lc := net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second,
		Interval: 5 * time.Second, Count: 3}}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sluice: server: %w", err)
	}
	l = &timeoutListener{Listener: l, userTimeout: max(3*s.cfg.Heartbeat, 30*time.Second)}
	l = &limitListener{Listener: l, max: int64(s.cfg.MaxConnections), refused: s.refusedConn}
	if s.cfg.TLS != nil {
		// ALPN offers HTTP/2 (which gRPC needs) unless the configuration
		// names its own protocols: Serve, unlike ServeTLS, adds none.
		cfg := s.cfg.TLS.Clone()
		if len(cfg.NextProtos) == 0 {
			cfg.NextProtos = []string{"h2", "http/1.1"}
		}
		l = tls.NewListener(l, cfg)
	}
	return l, nil
}

// httpServer is the HTTP server of one of Start's listeners.
func (s *Server) httpServer(h http.Handler) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if s.cfg.TLS != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:   h,
		Protocols: protocols,
		// A request's headers and body must come within ReadTimeout; the
		// bound ends with the body, not with the call (see conns.go).
		ReadTimeout:       s.cfg.ReadTimeout,
		ReadHeaderTimeout: min(s.cfg.ReadTimeout, maxReadHeaderTimeout),
		IdleTimeout:       2 * time.Minute,
		ConnContext:       withConn,
		// A connection that answers no ping is closed: its streams end,
		// and their deliveries go to other streams. (No write timeout: a
		// tail whose reader is slow would end.)
		HTTP2:    &http.HTTP2Config{SendPingTimeout: 2 * s.cfg.Heartbeat, PingTimeout: 15 * time.Second},
		ErrorLog: log.New(errorLog{s}, "", 0),
	}
}

// SQSAddr is the address the SQS endpoint listens on (after Start; nil
// without Config.SQSAddr).
func (s *Server) SQSAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sqsListener == nil {
		return nil
	}
	return s.sqsListener.Addr()
}

// Ready is closed once the server listens.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address the server listens on (after Start), with the
// port the system chose for ":0".
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Shutdown stops accepting calls, ends the waits of receives in progress
// (they return what they have), and waits for the calls in progress to
// finish until ctx ends. It is safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	s.m.close()
	s.mu.Lock()
	h, sh := s.http, s.sqsHTTP
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	var sqsDone chan error
	if sh != nil {
		sqsDone = make(chan error, 1)
		go func() { sqsDone <- sh.Shutdown(ctx) }()
	}
	err := h.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if sqsDone != nil {
		if serr := <-sqsDone; err == nil && !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	if s.sqs != nil {
		s.sqs.Wait() // its move tasks, which stopping ended
	}
	// A stream's handler can outlive its connection (HTTP/2 does not
	// wait for it): its consumer stores its final progress first.
	if werr := s.streams.wait(ctx); err == nil {
		err = werr
	}
	<-s.sampled
	select {
	case serr := <-s.done:
		if err == nil {
			err = serr
		}
	default:
	}
	return err
}

// timeoutListener sets the TCP user timeout of each connection it
// accepts.
type timeoutListener struct {
	net.Listener
	userTimeout time.Duration
}

func (l *timeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		setUserTimeout(c, l.userTimeout)
	}
	return c, err
}

// waitContext bounds a receive's or an accept's wait: by the call's
// context, the requested wait (capped by MaxReceiveWait; none: no wait),
// and the server's shutdown. A wait counts against the call's key's
// MaxWaits until the returned cancel.
func (s *Server) waitContext(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc, error) {
	wait = min(max(wait, 0), s.cfg.MaxReceiveWait)
	release := func() {}
	if wait > 0 {
		var err error
		if release, err = s.holdWait(ctx); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() { stop(); cancel(); release() }, nil
}

// recoverPanics turns a handler's panic into an internal error: a bug in
// one call must not take the server down.
func (s *Server) recoverPanics(next connect.ServerFunc) connect.ServerFunc {
	return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) (err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("sluice: server: a handler panicked", "procedure", spec.Procedure, "panic", r)
				err = connect.NewError(connect.CodeInternal, "internal error")
			}
		}()
		return next(ctx, spec, stream)
	}
}

// fail turns a library error into the call's error, logging the ones the
// client is not told about.
func (s *Server) fail(op string, err error) error {
	ce, internal := apierr.FromLibrary(err)
	switch {
	case internal:
		s.log.Error("sluice: server: "+op+" failed", "err", err)
	case errors.Is(err, sluice.ErrOutcomeUnknown):
		// The client gets no detail of the database's connection.
		s.log.Warn("sluice: server: "+op+": outcome unknown", "err", err)
	}
	return ce
}
