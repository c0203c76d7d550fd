package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard variables that turn tracing on without --otlp-endpoint;
// the exporter reads them, and the other OTEL_EXPORTER_OTLP_* ones
// (headers, timeout, compression, certificates), itself.
const (
	otlpEndpointEnv       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	otlpTracesEndpointEnv = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// newTracerProvider returns the tracer provider serve traces its API
// calls with: spans batched and exported over OTLP/HTTP (protobuf) to
// endpoint, else to where the standard environment variables say; nil
// when neither names a collector. Shut it down to flush the last spans.
func newTracerProvider(ctx context.Context, endpoint string, getenv func(string) string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	var opts []otlptracehttp.Option
	switch {
	case endpoint != "":
		u, err := otlpTracesURL(endpoint)
		if err != nil {
			return nil, usageErr("--otlp-endpoint %q: %v", endpoint, err)
		}
		endpoint = u
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	case getenv(otlpTracesEndpointEnv) != "":
		endpoint = getenv(otlpTracesEndpointEnv)
	case getenv(otlpEndpointEnv) != "":
		endpoint = getenv(otlpEndpointEnv)
	default:
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	// service.name is "sluice" unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "sluice")), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	// The exporter's failures (a collector that does not answer) reach
	// the log rather than the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("sluice: tracing", "err", err)
	}))
	log.Info("sluice: tracing API calls over OTLP/HTTP", "endpoint", endpoint)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// otlpTracesURL is the URL spans are posted to: a collector's base URL
// (http://host:4318) gets the traces path, /v1/traces, as
// OTEL_EXPORTER_OTLP_ENDPOINT does; a URL with a path is used as given.
func otlpTracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want a collector's URL, like http://localhost:4318")
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
