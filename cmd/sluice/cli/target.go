package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/stream"
	"github.com/sluicehq/sluice/store"
)

// target is where an operator command works: through a sluice server
// (--server), or on a database it opens itself (--db), in a tenant.
type target struct {
	server, token         string
	db, service, provider string
	json                  bool
}

func (t *target) register(fs *flag.FlagSet) {
	fs.StringVar(&t.server, "server", "", "work through the sluice server at this URL, http://host:port (env SLUICE_SERVER)")
	fs.StringVar(&t.token, "token", "", "the server's API key (env SLUICE_TOKEN)")
	fs.StringVar(&t.db, "db", "", "work on this database directly (env SLUICE_DB; default "+defaultServeConfig().DB+")")
	fs.StringVar(&t.service, "service", "", `tenant service name on --db (env SLUICE_SERVICE; default "default")`)
	fs.StringVar(&t.provider, "provider", "", `tenant provider name on --db (env SLUICE_PROVIDER; default "default")`)
	fs.BoolVar(&t.json, "json", false, "print one JSON object a line")
}

// resolve fills in what the flags left unset: each setting comes from its
// flag, else its environment variable, else its default (those of sluice
// serve). A --db flag beats SLUICE_SERVER.
func (t *target) resolve(fs *flag.FlagSet, getenv func(string) string) error {
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["server"] && given["db"] {
		return errors.New("--server and --db exclude each other: go through a server, or open the database")
	}
	if !given["server"] && !given["db"] {
		t.server = getenv("SLUICE_SERVER")
	}
	if t.server != "" {
		if given["service"] || given["provider"] {
			return errors.New("--service and --provider go with --db: a server serves its own tenant")
		}
		if !given["token"] {
			t.token = getenv("SLUICE_TOKEN")
		}
		return nil
	}
	if given["token"] {
		return errors.New("--token goes with --server")
	}
	def := defaultServeConfig()
	for _, s := range []struct {
		v         *string
		flag, env string
		def       string
	}{
		{&t.db, "db", "SLUICE_DB", def.DB},
		{&t.service, "service", "SLUICE_SERVICE", def.Service},
		{&t.provider, "provider", "SLUICE_PROVIDER", def.Provider},
	} {
		if given[s.flag] {
			continue
		}
		*s.v = getenv(s.env)
		if *s.v == "" {
			*s.v = s.def
		}
	}
	return nil
}

// open connects to the server, or opens the database. streams asks, on a
// database, for the tenant's stream partition count as the database
// records it, so that stream commands work whatever count the
// applications chose (recording the default when none is recorded, as
// any stream call would).
func (t *target) open(ctx context.Context, streams bool) (sluiceAPI, error) {
	if t.server != "" {
		c, err := client.New(t.server, &client.Options{Token: t.token})
		if err != nil {
			return nil, usageErr("--server: %v", err)
		}
		return remote{c}, nil
	}
	opts := sluice.Options{Service: t.service, Provider: t.provider}
	b, err := sluice.OpenBackend(ctx, t.db, opts)
	if err != nil {
		return nil, err
	}
	l, err := newLibrary(ctx, b, opts, streams)
	if err != nil {
		b.Close()
		return nil, err
	}
	return l, nil
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
	c, err := sluice.NewClient(b, opts)
	if err != nil {
		return nil, err
	}
	return &library{Client: c, backend: b, st: st, partitions: opts.StreamPartitions}, nil
}
