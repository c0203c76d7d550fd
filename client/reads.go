package client

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// readsKey keys, in a call's context, where the client's transport notes
// when the call's response last yielded bytes: a stream's watchdog
// counts silence from there, so that a large message that takes long to
// arrive is not taken for a broken connection.
type readsKey struct{}

// withReads makes the call of ctx note its reads in read (UnixNano).
func withReads(ctx context.Context, read *atomic.Int64) context.Context {
	return context.WithValue(ctx, readsKey{}, read)
}

// readsTransport notes the reads of the calls that ask for it.
type readsTransport struct{ next http.RoundTripper }

func (t readsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if read, ok := req.Context().Value(readsKey{}).(*atomic.Int64); ok && err == nil {
		read.Store(time.Now().UnixNano())
		res.Body = &readsBody{ReadCloser: res.Body, read: read}
	}
	return res, err
}

// CloseIdleConnections closes the idle connections of the transport it
// wraps.
func (t readsTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type readsBody struct {
	io.ReadCloser
	read *atomic.Int64
}

func (b *readsBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.read.Store(time.Now().UnixNano())
	}
	return n, err
}

// noteReads returns a copy of hc whose transport notes reads.
func noteReads(hc *http.Client) *http.Client {
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *hc
	c.Transport = readsTransport{next: next}
	return &c
}
