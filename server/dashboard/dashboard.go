// Package dashboard is the server's web dashboard: a page of plain HTML
// and JavaScript, embedded in the binary, that reads the HTTP/JSON API
// (the same calls, the same keys) in the browser. It shows the entities
// with their counts, and each entity's counts and this server's rates of
// its messages over the last hour (the server's history), topics and
// subscriptions, the stream cluster's nodes and partitions with the lag
// over the last hour, the server's throughput over the last minutes, and
// an entity's dead letters, which it can resubmit.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Mount serves the dashboard on mux: the page at "/", and each of its
// files at its own path (so that the API's routes, which share the mux,
// keep theirs).
func Mount(mux interface{ Handle(string, http.Handler) }) {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded
	}
	fileServer := http.FileServerFS(files)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No other site may frame it (its buttons move dead letters).
		w.Header().Set("Content-Security-Policy",
			"default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
	mux.Handle("GET /{$}", h)
	names, err := fs.Glob(files, "*")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		if name != "index.html" { // the file server redirects it to "/"
			mux.Handle("GET /"+name, h)
		}
	}
}
