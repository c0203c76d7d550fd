package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

// target is where an operator command works: through a sluice server
// (--server), or on a database it opens itself (--db), in a tenant.
type target struct {
	server, token         string
	db, service, provider string
	context               string // --context
	create                bool   // --create
	json                  bool
	// from says where the target came from, for messages: a flag, an
	// environment variable, a context; implicit is set when nothing said,
	// and open looks for a local server, then the default database.
	from     string
	implicit bool
	tenant   bool // --service or --provider given
}

func (t *target) register(fs *flag.FlagSet) {
	fs.StringVar(&t.server, "server", "", "work through the sluice server at this URL, http://host:port (env SLUICE_SERVER)")
	fs.StringVar(&t.token, "token", "", "the server's API key (env SLUICE_TOKEN)")
	fs.StringVar(&t.db, "db", "", "work on this database directly: sqlite://PATH, postgres://... or mysql://... (env SLUICE_DB)")
	fs.StringVar(&t.service, "service", "", `tenant service name on --db (env SLUICE_SERVICE; default "default")`)
	fs.StringVar(&t.provider, "provider", "", `tenant provider name on --db (env SLUICE_PROVIDER; default "default")`)
	fs.StringVar(&t.context, "context", "", "work where this saved context says (env SLUICE_CONTEXT; see sluice context)")
	fs.BoolVar(&t.create, "create", false, "create the database if it does not exist (an explicit --db creates it anyway)")
	fs.BoolVar(&t.json, "json", false, "print one JSON object a line")
}

// resolve works out where the command works, from the first of: the
// --server or --db flag; --context; SLUICE_SERVER or SLUICE_DB;
// SLUICE_CONTEXT; the selected context. When none says, the target is
// implicit: open then takes a server answering at sluice serve's default
// address (unless --service or --provider name a tenant, which only a
// database has), else the default database if it exists. --token,
// --service and --provider apply to what was chosen, before their
// variables and a context's own.
func (t *target) resolve(fs *flag.FlagSet, getenv func(string) string) error {
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case given["server"] && given["db"]:
		return usageErr("--server and --db exclude each other: go through a server, or open the database")
	case (given["server"] || given["db"]) && given["context"]:
		return usageErr("--context names a server or a database itself: give it, or --server or --db")
	case given["server"]:
		t.from = "--server"
	case given["db"]:
		t.from = "--db"
	case given["context"]:
		if err := t.useContext(t.context, "--context", given, getenv); err != nil {
			return err
		}
	case getenv("SLUICE_SERVER") != "":
		t.server, t.from = getenv("SLUICE_SERVER"), "SLUICE_SERVER"
	case getenv("SLUICE_DB") != "":
		t.db, t.from = getenv("SLUICE_DB"), "SLUICE_DB"
	case getenv("SLUICE_CONTEXT") != "":
		if err := t.useContext(getenv("SLUICE_CONTEXT"), "SLUICE_CONTEXT", given, getenv); err != nil {
			return err
		}
	default:
		cs, _, err := loadContexts(getenv)
		if err != nil {
			return err
		}
		if cs.Selected != "" {
			if err := t.useContext(cs.Selected, "the selected context", given, getenv); err != nil {
				return err
			}
		} else {
			t.implicit, t.from = true, "the default"
			t.db = defaultServeConfig().DB
		}
	}
	if t.server != "" {
		if given["service"] || given["provider"] {
			return usageErr("--service and --provider go with --db: a server serves its own tenant")
		}
		if t.token == "" {
			t.token = getenv("SLUICE_TOKEN")
		}
		return nil
	}
	if given["token"] && !t.implicit {
		return usageErr("--token goes with --server")
	}
	if t.token == "" && t.implicit {
		t.token = getenv("SLUICE_TOKEN") // for a local server, if one answers
	}
	t.tenant = given["service"] || given["provider"]
	def := defaultServeConfig()
	t.service = cmp.Or(t.service, getenv("SLUICE_SERVICE"), def.Service)
	t.provider = cmp.Or(t.provider, getenv("SLUICE_PROVIDER"), def.Provider)
	return nil
}

// useContext takes the target of the named context (named by from),
// but for what the flags gave.
func (t *target) useContext(name, from string, given map[string]bool, getenv func(string) string) error {
	cs, _, err := loadContexts(getenv)
	if err != nil {
		return err
	}
	c, err := cs.get(name)
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	t.server, t.db = c.Server, c.DB
	for _, s := range []struct {
		v    *string
		flag string
		ctx  string
	}{{&t.token, "token", c.Token}, {&t.service, "service", c.Service}, {&t.provider, "provider", c.Provider}} {
		if !given[s.flag] {
			*s.v = s.ctx
		}
	}
	t.from = "context " + name
	return nil
}

// localServer reports the URL of a sluice server answering at sluice
// serve's default address, if one does (a variable, for tests).
var localServer = func(ctx context.Context) (string, bool) {
	url := "http://" + server.DefaultAddr
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return "", false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	resp.Body.Close()
	return url, resp.StatusCode == http.StatusOK
}

// open connects to the server, or opens the database; what it chose
// without being told, and a database file it opens or creates, it says on
// stderr. It never creates a database by accident: an implicit one must
// exist (unless --create). streams asks, on a database, for the tenant's
// stream partition count as the database records it, so that stream
// commands work whatever count the applications chose (recording the
// default when none is recorded, as any stream call would).
func (t *target) open(ctx context.Context, streams bool, stderr io.Writer) (sluiceAPI, error) {
	if t.implicit && !t.tenant {
		if url, ok := localServer(ctx); ok {
			t.server = url
			fmt.Fprintf(stderr, "sluice: working through the server at %s (no --server, --db or context said where)\n", url)
		}
	}
	if t.server != "" {
		c, err := client.New(t.server, &client.Options{Token: t.token})
		if err != nil {
			return nil, usageErr("%s: %v", t.from, err)
		}
		return remote{c}, nil
	}
	created, err := t.checkFile()
	if err != nil {
		return nil, err
	}
	opts := sluice.Options{Service: t.service, Provider: t.provider}
	b, err := sluice.OpenBackend(ctx, t.db, &opts)
	if err != nil {
		return nil, err
	}
	if path, ok := sqlitePath(t.db); ok {
		verb := "using"
		if created {
			verb = "created"
		}
		fmt.Fprintf(stderr, "sluice: %s the database %s (from %s)\n", verb, path, t.from)
	}
	l, err := newLibrary(ctx, b, opts, streams)
	if err != nil {
		b.Close()
		return nil, err
	}
	return l, nil
}

// checkFile refuses to create a SQLite database the user did not name
// (the default one, with no server answering), unless --create; it
// reports whether the database is about to be created.
func (t *target) checkFile() (created bool, err error) {
	path, ok := sqlitePath(t.db)
	if !ok {
		return false, nil
	}
	if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if t.implicit && !t.create {
		return false, usageErr("nowhere to work: no server answers at http://%s, and there is no database %s here "+
			"(run sluice serve; or give --server URL, --db DSN, or --create to create %s; or save a context: sluice context add)",
			server.DefaultAddr, path, path)
	}
	return true, nil
}

// sqlitePath returns the file of a SQLite DSN, as sluice.Open reads it;
// ok is false for another database.
func sqlitePath(dsn string) (string, bool) {
	scheme, rest, found := strings.Cut(dsn, "://")
	if !found {
		return strings.TrimPrefix(dsn, "file:"), true
	}
	switch scheme {
	case "sqlite", "sqlite3", "file":
		return rest, true
	}
	return "", false
}

func newLibrary(ctx context.Context, b store.Backend, opts sluice.Options, streams bool) (*library, error) {
	st, err := b.Store(store.Tenant{Service: opts.Service, Provider: opts.Provider})
	if err != nil {
		return nil, fmt.Errorf("tenant %s/%s: %w", opts.Service, opts.Provider, err)
	}
	if streams {
		if opts.StreamPartitions, err = st.StreamPartitions(ctx, stream.DefaultPartitions); err != nil {
			return nil, fmt.Errorf("stream partitions: %w", err)
		}
	}
	c, err := sluice.NewClient(b, &opts)
	if err != nil {
		return nil, err
	}
	return &library{Client: c, backend: b}, nil
}
