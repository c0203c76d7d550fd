package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// The bounds on connections and on reading requests. Start's listener
// counts the connections it accepts against Config.MaxConnections, and
// each against the bound of every key whose calls it carried
// (Key.MaxConnections): a connection cannot be told apart by key before
// its first request's headers, so it counts against a key from the
// first call with the key's token on it until it closes. A connection
// that has sent no authenticated call counts only against the server's
// bound, and lasts no longer than its request's read bound
// (Config.ReadTimeout) or, idle, the server's idle timeout.
//
// The read bound (http.Server.ReadTimeout) covers a request's headers
// and its body, not the call: the HTTP server lifts it once the body is
// read (HTTP/1.1 clears the connection's read deadline when the body
// ends; HTTP/2 bounds each stream's body alone), so that a long receive,
// a Consume or a Tail stream outlives it.

// trackedConn is a connection Start's listener accepted: it holds a
// place in the server's bound until it closes, and one in the bound of
// each key whose calls it carried.
type trackedConn struct {
	net.Conn
	l *limitListener

	mu     sync.Mutex
	closed bool
	keys   map[*authKey]func() // what gives each key's place back
	once   sync.Once
}

// Close closes the connection and gives back its places.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		keys := c.keys
		c.keys = nil
		c.mu.Unlock()
		for _, release := range keys {
			release()
		}
		c.l.open.Add(-1)
	})
	return err
}

// hold counts the connection against k's bound, once: it fails with
// RESOURCE_EXHAUSTED when k holds as many connections as it may.
func (c *trackedConn) hold(k *authKey) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, held := c.keys[k]; held || c.closed {
		return nil
	}
	release, err := k.hold(&k.conns, k.maxConns, "TOO_MANY_CONNECTIONS", "connections open",
		": make calls on fewer connections (HTTP/2, or keep-alive), or close some")
	if err != nil {
		return err
	}
	if c.keys == nil {
		c.keys = make(map[*authKey]func())
	}
	c.keys[k] = release
	return nil
}

// limitListener closes at once the connections it accepts past max open
// at a time, and tracks the others.
type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func(peer net.Addr) // logs a refused connection
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &trackedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refused(c.RemoteAddr())
		_ = c.Close()
	}
}

type connCtx struct{}

// withConn is the http.Server's ConnContext: it makes a connection's
// calls find it.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if t, ok := c.(*trackedConn); ok {
		ctx = context.WithValue(ctx, connCtx{}, t)
	}
	return ctx
}

// httpCall is what a call's interceptors need of its HTTP exchange.
type httpCall struct {
	header http.Header // the response's
	http1  bool
	// unread is set when the call is refused before its request is read:
	// closing the request's body then leaves the rest unread, rather than
	// read it, as slowly as it comes, before answering.
	unread atomic.Bool
}

// requestBody is an HTTP/1 request's body, which its call may leave
// unread.
type requestBody struct {
	io.ReadCloser
	hc *httpCall
}

func (b *requestBody) Close() error {
	if b.hc.unread.Load() {
		return nil // the HTTP server closes it after the answer went
	}
	return b.ReadCloser.Close()
}

type httpCallCtx struct{}

// withHTTPCall makes a request's HTTP exchange known to its call's
// interceptors.
func withHTTPCall(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hc := &httpCall{header: w.Header(), http1: r.ProtoMajor == 1}
		r = r.WithContext(context.WithValue(r.Context(), httpCallCtx{}, hc))
		if hc.http1 && r.Body != nil {
			r.Body = &requestBody{ReadCloser: r.Body, hc: hc}
		}
		next.ServeHTTP(w, r)
	})
}

// holdConnection counts the call's connection against k's bound (a
// connection Start's listener did not accept is not counted).
func holdConnection(ctx context.Context, k *authKey) error {
	c, _ := ctx.Value(connCtx{}).(*trackedConn)
	if c == nil {
		return nil
	}
	return c.hold(k)
}

// refusedUnread is refused for a call refused before its request was
// read: an HTTP/1 connection closes after the answer, which goes at
// once. (Otherwise the HTTP server would read the rest of the request
// first, as slowly as its client sends it.)
func (s *Server) refusedUnread(ctx context.Context, k *authKey, err error) error {
	if hc, _ := ctx.Value(httpCallCtx{}).(*httpCall); hc != nil && hc.http1 {
		hc.header.Set("Connection", "close")
		hc.unread.Store(true)
	}
	return s.refused(ctx, k, err)
}
