package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A call that asks for it has each read of its response noted, so that a
// body arriving slowly counts as activity; other calls are left alone.
func TestReadsTransportNotesReads(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 3 {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer srv.Close()
	hc := noteReads(srv.Client())
	read := new(atomic.Int64)
	req, _ := http.NewRequestWithContext(withReads(context.Background(), read), http.MethodGet, srv.URL, nil)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var stamps []int64
	buf := make([]byte, 1)
	for {
		if _, err := res.Body.Read(buf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, read.Load())
	}
	if len(stamps) != 3 || stamps[0] == 0 || stamps[2]-stamps[0] < int64(80*time.Millisecond) {
		t.Fatalf("reads noted at %v, want three, 50 ms apart", stamps)
	}
	plain, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	res2, err := hc.Do(plain)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if _, ok := res2.Body.(*readsBody); ok {
		t.Error("a call that did not ask has its reads noted")
	}
}
