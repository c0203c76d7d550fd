package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// serve runs the server until ctx ends (SIGINT or SIGTERM), then shuts it
// down gracefully.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice serve [flags]\n\nServes the API (Connect, gRPC and HTTP/JSON on one port), /healthz and /readyz,\n"+
			"the dashboard at / and Prometheus metrics at /metrics.\n"+
			"Each setting comes from its flag, else its environment variable, else the --config file, else its default.\n\n"+
			"Tracing is off unless --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) names an OpenTelemetry collector:\n"+
			"then every API call is a span, exported over OTLP/HTTP as service \"sluice\", continuing a caller's\n"+
			"traceparent; the standard OTEL_* variables tune the exporter (headers, sampler, batching).\n\nflags:")
		printFlags(stderr, fs)
	}
	cfg, err := loadServeConfig(fs, args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err == nil {
		err = cfg.validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return ExitUsage
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err := runServer(ctx, cfg, log, stdout); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		if errors.Is(err, errUsage) {
			return ExitUsage
		}
		return ExitError
	}
	return ExitOK
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// tracesFlushTimeout bounds the export of the last spans at shutdown.
const tracesFlushTimeout = 10 * time.Second

func runServer(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) error {
	keys, err := cfg.keys()
	if err != nil {
		return usageErr("%v", err)
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	c, err := sluice.Open(ctx, cfg.DB, &sluice.Options{Service: cfg.Service, Provider: cfg.Provider, Logger: log,
		StreamPartitions: cfg.StreamPartitions, SkipMigrations: cfg.NoMigrate})
	if err != nil {
		return err
	}
	defer c.Close()
	scfg := server.Config{Client: c, Addr: cfg.Addr, SQSAddr: cfg.SQSAddr, Keys: keys, Insecure: cfg.Insecure, TLS: tlsCfg,
		MaxRequestBytes: cfg.MaxRequestBytes, MaxReceiveWait: time.Duration(cfg.MaxReceiveWait), MaxConsumers: cfg.MaxConsumers,
		MaxConnections: cfg.MaxConnections, ReadTimeout: time.Duration(cfg.ReadTimeout), SubscriptionLagMetrics: cfg.SubscriptionLagMetrics,
		HistoryInterval: time.Duration(cfg.HistoryInterval),
		Logger:          log}
	tp, err := newTracerProvider(ctx, cfg.OTLPEndpoint, os.Getenv, log)
	if err != nil {
		return err
	}
	if tp != nil {
		scfg.TracerProvider = tp
		// After the server's shutdown: the spans of its last calls go too.
		defer func() {
			fctx, cancel := context.WithTimeout(context.Background(), tracesFlushTimeout)
			defer cancel()
			if err := tp.Shutdown(fctx); err != nil {
				log.Warn("sluice: tracing: the last spans were not exported", "err", err)
			}
		}()
	}
	srv, err := server.New(scfg)
	if err != nil {
		return usageErr("%v", err)
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	url := scheme + "://" + srv.Addr().String()
	fmt.Fprintf(stdout, "sluice serving %s on %s: Connect, gRPC and HTTP/JSON; /healthz, /readyz\n", sluice.RedactDSN(cfg.DB), url)
	fmt.Fprintf(stdout, "dashboard: %s/   metrics: %s/metrics\n", url, url)
	if a := srv.SQSAddr(); a != nil {
		fmt.Fprintf(stdout, "SQS endpoint: %s://%s (AWS SDKs: set the endpoint URL; access key id = a key's name)\n", scheme, a)
	}
	switch {
	case !cfg.SelfCheck:
	case len(keys) > 0 && cfg.Token == "":
		fmt.Fprintln(stdout, "self-check skipped: API keys are configured, and the check needs --token")
	case tlsCfg != nil:
		fmt.Fprintln(stdout, "self-check skipped over HTTPS: the check would have to trust the certificate")
	default:
		if d, err := selfCheck(ctx, url, cfg.Token); err != nil {
			fmt.Fprintf(stdout, "self-check failed: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "self-check: created a queue, sent, received and completed a message over the API in %v, and deleted the queue\n",
				d.Round(10*time.Microsecond))
		}
	}
	if tlsCfg == nil && cfg.Token == "" && len(keys) == 0 {
		fmt.Fprintf(stdout, "try: curl -s -H 'Content-Type: application/json' -d '{\"name\": \"orders\"}' %s/sluice.v1.EntityService/CreateQueue\n", url)
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// selfCheck takes a message through the server's own API: a throwaway
// queue, a send, a receive, a complete, and the queue's deletion. It
// needs a key with every permission (--token) when keys are configured.
func selfCheck(ctx context.Context, url, token string) (time.Duration, error) {
	c, err := client.New(url, &client.Options{Token: token, JSON: true})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := fmt.Sprintf("sluice-self-check-%d", time.Now().UnixNano())
	began := time.Now()
	if _, err := c.CreateQueue(ctx, name, nil); err != nil {
		return 0, err
	}
	defer c.DeleteQueue(context.WithoutCancel(ctx), name)
	snd, _ := c.NewSender(name)
	if _, err := snd.Send(ctx, &sluice.Message{Body: []byte("hello from the self-check")}); err != nil {
		return 0, err
	}
	r, _ := c.NewReceiver(name, nil)
	ms, err := r.Receive(ctx, 1)
	if err != nil {
		return 0, err
	}
	if err := r.Complete(ctx, ms[0]); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}
