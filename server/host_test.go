package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The name the server listens on passes the loopback Host check, as
// loopback names and addresses do; other names do not.
func TestLoopbackHostsOnlyListenName(t *testing.T) {
	h := loopbackHostsOnly(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), "devbox")
	for host, want := range map[string]int{
		"devbox:7070": http.StatusOK, "DEVBOX": http.StatusOK, "devbox.": http.StatusOK, "[::1]:7070": http.StatusOK,
		"127.0.0.2": http.StatusOK, "devbox.evil.example": http.StatusMisdirectedRequest, "evil.example:7070": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}
