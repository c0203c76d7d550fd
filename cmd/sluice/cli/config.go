package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/server"
)

// serveConfig is what sluice serve runs with. Each setting comes from its
// flag when given, else from its SLUICE_* environment variable, else
// from the configuration file (--config, SLUICE_CONFIG), else its
// default. API keys come from the file, or one from --token.
type serveConfig struct {
	DB               string   `json:"db"`
	Addr             string   `json:"addr"`
	SQSAddr          string   `json:"sqs_addr"`
	Service          string   `json:"service"`
	Provider         string   `json:"provider"`
	Insecure         bool     `json:"insecure"`
	TLSCert          string   `json:"tls_cert"`
	TLSKey           string   `json:"tls_key"`
	Token            string   `json:"token"`
	MaxRequestBytes  int      `json:"max_request_bytes"`
	MaxReceiveWait   duration `json:"max_receive_wait"`
	MaxConsumers     int      `json:"max_consumers"`
	MaxConnections   int      `json:"max_connections"`
	ReadTimeout      duration `json:"read_timeout"`
	HistoryInterval  duration `json:"history_interval"`
	LogLevel         string   `json:"log_level"`
	LogFormat        string   `json:"log_format"`
	SelfCheck        bool     `json:"self_check"`
	NoMigrate        bool     `json:"no_migrate"`
	StreamPartitions int32    `json:"stream_partitions"`
	OTLPEndpoint     string   `json:"otlp_endpoint"`
	// SubscriptionLagMetrics: a lag series per stream subscription and
	// partition in /metrics.
	SubscriptionLagMetrics bool          `json:"metrics_subscription_lag"`
	Keys                   []keyConfig   `json:"keys"`
	ShutdownTimeout        time.Duration `json:"-"`
}

// keyConfig is an API key in the configuration file.
type keyConfig struct {
	Name          string        `json:"name"`
	Token         string        `json:"token"`
	TokenSHA256   string        `json:"token_sha256"`
	Grants        []grantConfig `json:"grants"`
	RatePerSecond float64       `json:"rate_per_second"`
	Burst         int           `json:"burst"`
	MaxStreams    int           `json:"max_streams"`
	MaxWaits      int           `json:"max_waits"`
	// MaxConnections and MaxConsumers: 0 takes the server's default, a
	// negative number lifts the key's own bound.
	MaxConnections int `json:"max_connections"`
	MaxConsumers   int `json:"max_consumers"`
}

type grantConfig struct {
	Actions  []string `json:"actions"`
	Entities []string `json:"entities"`
}

// duration is a time.Duration that JSON spells "90s", read by
// parseDuration (negative refused, too long saturated).
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"60s\": %w", err)
	}
	v, err := parseDuration(s)
	*d = duration(v)
	return err
}

// setting is one setting: its flag, its environment variable, what it
// is, and where it lands. kind is how -h names its values: "bool",
// "int", "duration" or "string".
type setting struct {
	flag, env, usage string
	set              func(string) error
	kind             string
}

// configSettings lists the settings of c, bound to their fields.
func configSettings(c *serveConfig) []setting {
	str := func(p *string) func(string) error { return func(s string) error { *p = s; return nil } }
	boolean := func(p *bool) func(string) error {
		return func(s string) error {
			v, err := strconv.ParseBool(s)
			*p = v
			return err
		}
	}
	return []setting{
		{"db", "SLUICE_DB", "database DSN: sqlite://PATH, postgres://... or mysql://...", str(&c.DB), "string"},
		{"addr", "SLUICE_ADDR", "address to listen on", str(&c.Addr), "string"},
		{"sqs-addr", "SLUICE_SQS_ADDR", "also serve Amazon SQS's JSON protocol on this address (signed with AWS Signature V4: access key id = a key's name, secret = its token)", str(&c.SQSAddr), "string"},
		{"service", "SLUICE_SERVICE", "tenant service name", str(&c.Service), "string"},
		{"provider", "SLUICE_PROVIDER", "tenant provider name", str(&c.Provider), "string"},
		{"insecure", "SLUICE_INSECURE", "allow a non-loopback address without API keys", boolean(&c.Insecure), "bool"},
		{"tls-cert", "SLUICE_TLS_CERT", "TLS certificate file (PEM); with --tls-key, serve HTTPS", str(&c.TLSCert), "string"},
		{"tls-key", "SLUICE_TLS_KEY", "TLS private key file (PEM)", str(&c.TLSKey), "string"},
		{"token", "SLUICE_TOKEN", "require this bearer token (an API key with every permission)", str(&c.Token), "string"},
		{"max-request-bytes", "SLUICE_MAX_REQUEST_BYTES", "largest request message accepted", func(s string) error {
			v, err := strconv.Atoi(s)
			c.MaxRequestBytes = v
			return err
		}, "int"},
		{"max-receive-wait", "SLUICE_MAX_RECEIVE_WAIT", "longest wait of a receive", func(s string) error {
			v, err := parseDuration(s)
			c.MaxReceiveWait = duration(v)
			return err
		}, "duration"},
		{"max-consumers", "SLUICE_MAX_CONSUMERS", "most stream consumers that Consume streams run on this server at once", func(s string) error {
			v, err := strconv.Atoi(s)
			if err == nil && v < 1 {
				err = errors.New("want at least 1")
			}
			c.MaxConsumers = v
			return err
		}, "int"},
		{"max-connections", "SLUICE_MAX_CONNECTIONS", "most connections open to the server at once", func(s string) error {
			v, err := strconv.Atoi(s)
			if err == nil && v < 1 {
				err = errors.New("want at least 1")
			}
			c.MaxConnections = v
			return err
		}, "int"},
		{"read-timeout", "SLUICE_READ_TIMEOUT", "longest time to read a request's headers and message (not the call: waits and streams last longer)", func(s string) error {
			v, err := time.ParseDuration(s)
			if err == nil && v <= 0 {
				err = errors.New("want a positive duration")
			}
			c.ReadTimeout = duration(v)
			return err
		}, "duration"},
		{"history-interval", "SLUICE_HISTORY_INTERVAL", "how often the server samples entities' counts, its rates and stream lag for " +
			"the dashboard's last hour (100ms to 5m)", func(s string) error {
			v, err := time.ParseDuration(s)
			if err == nil && (v < 100*time.Millisecond || v > 5*time.Minute) {
				err = errors.New("want 100ms to 5m")
			}
			c.HistoryInterval = duration(v)
			return err
		}, "duration"},
		{"stream-partitions", "SLUICE_STREAM_PARTITIONS", "stream partitions: those the database recorded, else this many (else 16)", func(s string) error {
			v, err := strconv.ParseInt(s, 10, 32)
			c.StreamPartitions = int32(v)
			return err
		}, "int"},
		{"log-level", "SLUICE_LOG_LEVEL", "debug, info, warn or error", str(&c.LogLevel), "string"},
		{"log-format", "SLUICE_LOG_FORMAT", "text or json", str(&c.LogFormat), "string"},
		{"self-check", "SLUICE_SELF_CHECK", "at start, send and receive a message through the API and say how long it took", boolean(&c.SelfCheck), "bool"},
		{"no-migrate", "SLUICE_NO_MIGRATE", "do not apply migrations at start (sluice migrate up does): refuse a schema at another version", boolean(&c.NoMigrate), "bool"},
		{"metrics-subscription-lag", "SLUICE_METRICS_SUBSCRIPTION_LAG", "add a lag series per stream subscription and partition to /metrics " +
			"(lag is summed per consumer and namespace without it)", boolean(&c.SubscriptionLagMetrics), "bool"},
		{"otlp-endpoint", "SLUICE_OTLP_ENDPOINT", "trace every API call, exporting the spans over OTLP/HTTP to this collector " +
			"(http://host:4318, or a URL with its path; without it, OTEL_EXPORTER_OTLP_ENDPOINT or " +
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turn tracing on)", str(&c.OTLPEndpoint), "string"},
	}
}

// defaultServeConfig is what serve runs with when nothing says otherwise.
func defaultServeConfig() serveConfig {
	return serveConfig{DB: "sqlite://sluice-data/sluice.db", Addr: server.DefaultAddr, Service: "default", Provider: "default",
		MaxRequestBytes: server.DefaultMaxRequestBytes, MaxReceiveWait: duration(server.DefaultMaxReceiveWait),
		MaxConsumers: server.DefaultMaxConsumers, MaxConnections: server.DefaultMaxConnections,
		ReadTimeout: duration(server.DefaultReadTimeout), HistoryInterval: duration(server.DefaultHistoryInterval),
		LogLevel: "info", LogFormat: "text", SelfCheck: true, ShutdownTimeout: 30 * time.Second}
}

// loadServeConfig reads the configuration from args, the environment
// (getenv) and the file they name.
func loadServeConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (serveConfig, error) {
	cfg := defaultServeConfig()
	configFile := fs.String("config", "", "configuration file (JSON; env SLUICE_CONFIG)")
	flags := make(map[string]*settingValue)
	defaults := cfg.flagDefaults()
	for _, s := range configSettings(&cfg) {
		v := &settingValue{kind: s.kind}
		flags[s.flag] = v
		fs.Var(v, s.flag, s.usage+" (env "+s.env+")")
		fs.Lookup(s.flag).DefValue = defaults[s.flag]
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	path := *configFile
	if !given["config"] {
		path = getenv("SLUICE_CONFIG")
	}
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("configuration file: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("configuration file %s: %w", path, err)
		}
	}
	// The environment over the file, the flags over both.
	for _, s := range configSettings(&cfg) {
		v, from := getenv(s.env), s.env
		if given[s.flag] {
			v, from = flags[s.flag].raw, "--"+s.flag
		}
		if v == "" && !given[s.flag] {
			continue
		}
		if err := s.set(v); err != nil {
			return cfg, fmt.Errorf("%s=%q: %w", from, v, err)
		}
	}
	return cfg, nil
}

// keys returns the server's API keys.
func (c *serveConfig) keys() ([]server.Key, error) {
	var keys []server.Key
	if c.Token != "" {
		// One token often serves every client: only the server's bounds
		// on streams, connections and consumers apply to it, and none on
		// waits.
		keys = append(keys, server.Key{Name: "token", Token: c.Token, MaxStreams: -1, MaxWaits: -1, MaxConnections: -1, MaxConsumers: -1,
			Grants: []server.Grant{{Actions: server.All, Entities: []string{"*"}}}})
	}
	for _, k := range c.Keys {
		sk := server.Key{Name: k.Name, Token: k.Token, TokenSHA256: k.TokenSHA256, RatePerSecond: k.RatePerSecond, Burst: k.Burst,
			MaxStreams: k.MaxStreams, MaxWaits: k.MaxWaits, MaxConnections: k.MaxConnections, MaxConsumers: k.MaxConsumers}
		for _, g := range k.Grants {
			var sg server.Grant
			for _, a := range g.Actions {
				act, err := server.ParseAction(a)
				if err != nil {
					return nil, fmt.Errorf("key %q: %w", k.Name, err)
				}
				sg.Actions |= act
			}
			if sg.Actions == 0 || len(g.Entities) == 0 {
				return nil, fmt.Errorf("key %q: a grant needs actions and entities", k.Name)
			}
			sg.Entities = g.Entities
			sk.Grants = append(sk.Grants, sg)
		}
		keys = append(keys, sk)
	}
	return keys, nil
}

// errUsage marks a configuration error the user fixes by changing the
// command line, the environment or the file.
var errUsage = errors.New("usage")

// usageErr is an error the user fixes by changing the command line: its
// message says what and how, with no prefix of its own; errors.Is finds
// errUsage in it (exit code 2).
func usageErr(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

type usageError struct{ err error }

func (e *usageError) Error() string        { return e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == errUsage }

// validate checks settings whose errors New would report less clearly.
func (c *serveConfig) validate() error {
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return usageErr("--tls-cert and --tls-key go together")
	case !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel):
		return usageErr("log level %q: want debug, info, warn or error", c.LogLevel)
	case c.LogFormat != "text" && c.LogFormat != "json":
		return usageErr("log format %q: want text or json", c.LogFormat)
	}
	// A negative bound would silently take the default, as zero does.
	for _, b := range []struct {
		name  string
		value int64
	}{{"max_request_bytes", int64(c.MaxRequestBytes)}, {"max_receive_wait", int64(c.MaxReceiveWait)},
		{"max_consumers", int64(c.MaxConsumers)}, {"stream_partitions", int64(c.StreamPartitions)}} {
		if b.value < 0 {
			return usageErr("%s must not be negative (0 takes the default)", b.name)
		}
	}
	if c.OTLPEndpoint != "" {
		if _, err := otlpTracesURL(c.OTLPEndpoint); err != nil {
			return usageErr("OTLP endpoint %q: %v", c.OTLPEndpoint, err)
		}
	}
	return nil
}

// settingValue is a serve flag as given: the string it is checked and
// set from with the environment's and the file's (so that each source's
// errors read alike). A bool needs no value: --insecure is
// --insecure=true.
type settingValue struct {
	raw  string
	kind string
}

func (v *settingValue) String() string {
	if v == nil {
		return ""
	}
	return v.raw
}

func (v *settingValue) Set(s string) error {
	v.raw = s
	return nil
}

// IsBoolFlag lets a bool setting be given without a value.
func (v *settingValue) IsBoolFlag() bool { return v.kind == "bool" }

// flagDefaults are c's settings as a flag would give them, by flag name
// ("" for an empty string).
func (c serveConfig) flagDefaults() map[string]string {
	b, _ := json.Marshal(c)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	_ = dec.Decode(&m)
	out := make(map[string]string)
	for k, v := range m {
		if v == nil || fmt.Sprint(v) == "0" {
			continue // no default of its own: 0 means "as the database says"
		}
		out[strings.ReplaceAll(k, "_", "-")] = fmt.Sprint(v)
	}
	return out
}

// MarshalJSON writes a duration as the file spells it: "60s".
func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(formatDuration(time.Duration(d)))
}

// printFlags prints a flag set's flags for -h: each with the kind of
// value it takes (none for a bool), then what it does, its environment
// variable and its default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		kind := "string"
		switch v := f.Value.(type) {
		case *settingValue:
			kind = v.kind
		case interface{ IsBoolFlag() bool }:
			if v.IsBoolFlag() {
				kind = "bool"
			}
		}
		name := "--" + f.Name
		if kind != "bool" {
			name += " " + kind
		}
		usage := f.Usage
		if f.DefValue != "" {
			def := f.DefValue
			if kind == "string" {
				def = strconv.Quote(def)
			}
			usage = strings.TrimSuffix(usage, ")") + "; default " + def + ")"
			if !strings.HasSuffix(f.Usage, ")") {
				usage = f.Usage + " (default " + def + ")"
			}
		}
		fmt.Fprintf(w, "  %s\n    \t%s\n", name, usage)
	})
}
