package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// metrics are the server's Prometheus metrics, served at /metrics: the
// calls it serves, and from sluiceprom's collector what the calls of
// its client did to messages, its process's dead-letterings and, read
// from the database at each scrape, the entities' depths and the stream
// partitions' lag; and the stream caches of the consumers it runs
// (cacheCollector).
type metrics struct {
	x        *sluiceprom.Collector // what the calls did to messages, the database's figures, the labels of entities
	stopTP   func()                // ends the throughput's observation of the calls
	hist     *history              // fed the calls' counts per entity, and forgetting what the metrics forget (feed)
	stopHist func()                // ends the history's observation of the calls
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_api_calls_total",
			Help: "API calls served, by procedure and status code."}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_api_call_duration_seconds",
			Help:    "How long API calls took, waits of receives included, by procedure.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 30, 60}}, []string{"procedure"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_api_calls_in_flight",
			Help: "API calls in progress, waiting receives included."}),
	}
	m.x = sluiceprom.New(s.c, &sluiceprom.Options{MaxEntities: maxScrapeEntities, SubscriptionLag: s.cfg.SubscriptionLagMetrics})
	m.stopTP = s.c.ObserveMessages(s.tp.observe)
	m.reg.MustRegister(m.calls, m.duration, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.x)
	return m
}

// maxScrapeEntities bounds the entities a scrape reads.
const maxScrapeEntities = 1000

// feed has the history count what c's calls do to messages, per entity,
// and forget the entities the metrics forget.
func (m *metrics) feed(h *history, c *sluice.Client) {
	m.hist = h
	m.stopHist = c.ObserveMessages(h.observe)
}

// close ends the observations of the library's dead-letterings and
// calls. It is idempotent.
func (m *metrics) close() {
	m.x.Close()
	m.stopTP()
	if m.stopHist != nil {
		m.stopHist()
	}
}

// observe counts and times every call, before authentication, so that
// refused calls count too.
func (m *metrics) observe(next connect.ServerFunc) connect.ServerFunc {
	return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
		began := time.Now()
		m.inFlight.Inc()
		err := next(ctx, spec, requestStream{stream})
		m.inFlight.Dec()
		code := "ok"
		if err != nil {
			code = connect.CodeOf(err).String()
		}
		procedure := spec.Procedure
		if spec.Schema == nil {
			procedure = "unknown" // not one of the API's: a caller chose the path
		}
		m.calls.WithLabelValues(procedure, code).Inc()
		m.duration.WithLabelValues(procedure).Observe(time.Since(began).Seconds())
		return err
	}
}

// requestStream is a call's stream whose request messages that cannot
// be read are the client's error: a truncated envelope, or one flagged
// compressed without an encoding, fails the call with INVALID_ARGUMENT,
// not the INTERNAL that connect reports for a protocol error, and does
// not count as the server's error.
type requestStream struct{ connect.ServerStream }

func (s requestStream) Receive(msg any) error {
	err := s.ServerStream.Receive(msg)
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if code := connect.CodeOf(err); code == connect.CodeInternal || code == connect.CodeUnknown {
		msg := err.Error()
		var ce *connect.Error
		if errors.As(err, &ce) {
			msg = ce.Message()
		}
		return connect.NewError(connect.CodeInvalidArgument, "reading the request: "+msg)
	}
	return err
}

// entity is the label of an entity's name (a stream namespace's or a
// consumer's, too), as sluiceprom labels entities: its canonical form,
// or "_other" past the collector's bound.
func (m *metrics) entity(name string) string { return m.x.EntityLabel(name) }

// forgetEntity drops the series of a deleted entity, and of the
// subscriptions under it when it is a topic (under: their prefix), with
// their labels, so that throwaway queues (the self-check's) never fill
// the labels, and their history.
func (m *metrics) forgetEntity(name, under string) {
	m.hist.forget(name, under)
	m.x.ForgetEntity(name, under)
}

// MetricsEntity is the name a grant names to let a key read /metrics
// with Manage ("*" covers it too).
const MetricsEntity = "$metrics"

// handler serves the metrics: to anyone without keys, else to a key that
// may manage MetricsEntity, authenticated as an API call is (Prometheus
// sends the token as "Authorization: Bearer <token>") and within the
// key's rate limit.
func (m *metrics) handler(s *Server) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.keys != nil {
			k, err := s.keys.admit(r.Header.Get("Authorization"))
			if err == nil && !k.allows(Manage, MetricsEntity) {
				err = connect.NewError(connect.CodePermissionDenied,
					fmt.Sprintf("key %q may not read the metrics (grant manage on %s)", k.Name, MetricsEntity))
			}
			if err != nil {
				s.refusedHTTP(r, k, err)
				code := connect.CodeOf(err)
				http.Error(w, code.String()+": "+errMessage(err), httpStatus(code))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
