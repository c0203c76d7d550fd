package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
)

// A context names where operator commands work, as the nats CLI's
// contexts do: a server (its URL and API key) or a database (its DSN and
// tenant). Contexts live in one file in the user's configuration
// directory (contextsFile); the selected one is where a command works
// when no flag or environment variable says.

// savedContext is one context as the file keeps it.
type savedContext struct {
	Server   string `json:"server,omitempty"`
	Token    string `json:"token,omitempty"`
	DB       string `json:"db,omitempty"`
	Service  string `json:"service,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// describe says where c works, for people: the token is never shown.
func (c savedContext) describe() string {
	if c.Server != "" {
		s := "server " + c.Server
		if c.Token != "" {
			s += " (with an API key)"
		}
		return s
	}
	s := "database " + sluice.RedactDSN(c.DB)
	if c.Service != "" || c.Provider != "" {
		s += fmt.Sprintf(" (tenant %s/%s)", orDefault(c.Service), orDefault(c.Provider))
	}
	return s
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// contexts is the file's content.
type contexts struct {
	Selected string                  `json:"selected,omitempty"`
	Contexts map[string]savedContext `json:"contexts"`
}

// contextsFile is where the contexts live: $SLUICE_CONFIG_DIR, else the
// user's configuration directory (os.UserConfigDir), under sluice/.
func contextsFile(getenv func(string) string) (string, error) {
	dir := getenv("SLUICE_CONFIG_DIR")
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no configuration directory for contexts (set SLUICE_CONFIG_DIR): %w", err)
		}
		dir = filepath.Join(base, "sluice")
	}
	return filepath.Join(dir, "contexts.json"), nil
}

// loadContexts reads the contexts; none when the file does not exist.
func loadContexts(getenv func(string) string) (*contexts, string, error) {
	file, err := contextsFile(getenv)
	if err != nil {
		return nil, "", err
	}
	cs := &contexts{Contexts: map[string]savedContext{}}
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cs, file, nil
	case err != nil:
		return nil, file, fmt.Errorf("contexts: %w", err)
	}
	if err := json.Unmarshal(b, cs); err != nil {
		return nil, file, fmt.Errorf("contexts: %s: %w (fix or remove the file)", file, err)
	}
	if cs.Contexts == nil {
		cs.Contexts = map[string]savedContext{}
	}
	return cs, file, nil
}

// save writes the contexts, readable by the user alone: they may hold API
// keys.
func (cs *contexts) save(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	b, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	return nil
}

// contextName is what a context may be called.
var contextName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkContextName(name string) error {
	if !contextName.MatchString(name) {
		return usageErr("context name %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// get returns the named context, or an error that lists the others.
func (cs *contexts) get(name string) (savedContext, error) {
	c, ok := cs.Contexts[name]
	if !ok {
		names := slices.Sorted(maps.Keys(cs.Contexts))
		hint := "add it with sluice context add " + name
		if len(names) > 0 {
			hint = "there are " + strings.Join(names, ", ") + "; or " + hint
		}
		return c, usageErr("no context %q (%s)", name, hint)
	}
	return c, nil
}

// The context commands need no target: they work on the contexts file.

func opContextAdd() *op {
	var server, token, db, service, provider string
	var sel, force bool
	return &op{name: "context add", args: "NAME", minArgs: 1, maxArgs: 1, noTarget: true,
		about: "Saves a context: where commands work without --server or --db. Give --server (and --token),\n" +
			"or --db (and --service, --provider). The file is readable by you alone: it may hold API keys.",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&server, "server", "", "the sluice server's URL, http://host:port")
			fs.StringVar(&token, "token", "", "the server's API key")
			fs.StringVar(&db, "db", "", "a database DSN: sqlite://PATH, postgres://... or mysql://...")
			fs.StringVar(&service, "service", "", `the tenant's service name on --db (default "default")`)
			fs.StringVar(&provider, "provider", "", `the tenant's provider name on --db (default "default")`)
			fs.BoolVar(&sel, "select", false, "select it too")
			fs.BoolVar(&force, "f", false, "replace a context of that name")
		},
		check: func(args []string) error {
			if err := checkContextName(args[0]); err != nil {
				return err
			}
			switch {
			case server != "" && db != "":
				return usageErr("--server and --db exclude each other: a context is a server or a database")
			case server == "" && db == "":
				return usageErr("give --server URL or --db DSN")
			case server != "" && (service != "" || provider != ""):
				return usageErr("--service and --provider go with --db: a server serves its own tenant")
			case db != "" && token != "":
				return usageErr("--token goes with --server")
			}
			if server != "" {
				if u, err := url.Parse(server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usageErr("--server %q: want http://host:port or https://host:port", server)
				}
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			cs, file, err := loadContexts(e.getenv)
			if err != nil {
				return err
			}
			name := args[0]
			if _, exists := cs.Contexts[name]; exists && !force {
				return usageErr("context %q exists: give -f to replace it", name)
			}
			c := savedContext{Server: server, Token: token, DB: db, Service: service, Provider: provider}
			cs.Contexts[name] = c
			if sel {
				cs.Selected = name
			}
			if err := cs.save(file); err != nil {
				return err
			}
			if e.json {
				return e.emit(contextView(name, c, cs.Selected == name))
			}
			fmt.Fprintf(e.stdout, "context %s: %s", name, c.describe())
			if sel {
				fmt.Fprint(e.stdout, " (selected)")
			}
			fmt.Fprintln(e.stdout)
			return nil
		}}
}

func opContextList() *op {
	return &op{name: "context list", noTarget: true, about: "Lists the contexts; * marks the selected one.",
		run: func(ctx context.Context, e *env, args []string) error {
			cs, file, err := loadContexts(e.getenv)
			if err != nil {
				return err
			}
			names := slices.Sorted(maps.Keys(cs.Contexts))
			if e.json {
				for _, n := range names {
					if err := e.emit(contextView(n, cs.Contexts[n], n == cs.Selected)); err != nil {
						return err
					}
				}
				return nil
			}
			if len(names) == 0 {
				fmt.Fprintf(e.stdout, "no contexts in %s (add one: sluice context add NAME --server URL)\n", file)
				return nil
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "\tNAME\tWHERE")
			for _, n := range names {
				mark := ""
				if n == cs.Selected {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", mark, n, cs.Contexts[n].describe())
			}
			return tw.Flush()
		}}
}

func opContextSelect() *op {
	var none bool
	return &op{name: "context select", args: "[NAME]", maxArgs: 1, noTarget: true,
		about: "Selects the context commands use when no --server, --db, --context or SLUICE_* variable says\n" +
			"where; --none selects none.",
		flags: func(fs *flag.FlagSet) { fs.BoolVar(&none, "none", false, "select no context") },
		check: func(args []string) error {
			if none == (len(args) == 1) {
				return usageErr("give a context's NAME, or --none")
			}
			return nil
		},
		run: func(ctx context.Context, e *env, args []string) error {
			cs, file, err := loadContexts(e.getenv)
			if err != nil {
				return err
			}
			cs.Selected = ""
			if !none {
				if _, err := cs.get(args[0]); err != nil {
					return err
				}
				cs.Selected = args[0]
			}
			if err := cs.save(file); err != nil {
				return err
			}
			if !e.json {
				if none {
					fmt.Fprintln(e.stdout, "no context selected")
				} else {
					fmt.Fprintf(e.stdout, "selected context %s: %s\n", args[0], cs.Contexts[args[0]].describe())
				}
			}
			return nil
		}}
}

func opContextShow() *op {
	return &op{name: "context show", args: "[NAME]", maxArgs: 1, noTarget: true,
		about: "Shows a context (the selected one without NAME); an API key shows as set, never itself.",
		run: func(ctx context.Context, e *env, args []string) error {
			cs, file, err := loadContexts(e.getenv)
			if err != nil {
				return err
			}
			name := cs.Selected
			if len(args) == 1 {
				name = args[0]
			}
			if name == "" {
				return usageErr("no context selected (in %s): name one, or select one with sluice context select NAME", file)
			}
			c, err := cs.get(name)
			if err != nil {
				return err
			}
			if e.json {
				return e.emit(contextView(name, c, name == cs.Selected))
			}
			fmt.Fprintf(e.stdout, "context %s: %s\n", name, c.describe())
			return nil
		}}
}

func opContextRemove() *op {
	return &op{name: "context remove", args: "NAME", minArgs: 1, maxArgs: 1, noTarget: true,
		about: "Removes a context (and selects none if it was selected).",
		run: func(ctx context.Context, e *env, args []string) error {
			cs, file, err := loadContexts(e.getenv)
			if err != nil {
				return err
			}
			if _, err := cs.get(args[0]); err != nil {
				return err
			}
			delete(cs.Contexts, args[0])
			if cs.Selected == args[0] {
				cs.Selected = ""
			}
			if err := cs.save(file); err != nil {
				return err
			}
			if !e.json {
				fmt.Fprintf(e.stdout, "removed context %s\n", args[0])
			}
			return nil
		}}
}

// contextJSON is a context for --json: the token only as whether one is
// set.
type contextJSON struct {
	Name     string `json:"name"`
	Selected bool   `json:"selected"`
	Server   string `json:"server,omitempty"`
	Token    bool   `json:"token,omitempty"`
	DB       string `json:"db,omitempty"`
	Service  string `json:"service,omitempty"`
	Provider string `json:"provider,omitempty"`
}

func contextView(name string, c savedContext, selected bool) contextJSON {
	return contextJSON{Name: name, Selected: selected, Server: c.Server, Token: c.Token != "", DB: sluice.RedactDSN(c.DB),
		Service: c.Service, Provider: c.Provider}
}
