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
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// metrics are the server's Prometheus metrics, served at /metrics: the
// calls it serves, what they did to messages, the stream caches of the
// consumers it runs (cacheCollector), and, read from the database at
// each scrape, the entities' depths and the stream partitions' lag.
type metrics struct {
	tp       *throughput
	hist     *history              // counts messages per entity for the history's rates
	x        *sluiceprom.Collector // the database's figures, dead-letterings, the labels of entities
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	sent     *prometheus.CounterVec
	received *prometheus.CounterVec
	settled  *prometheus.CounterVec
	lockLost *prometheus.CounterVec
	waited   *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		tp:  &s.tp,
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_api_calls_total",
			Help: "API calls served, by procedure and status code."}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_api_call_duration_seconds",
			Help:    "How long API calls took, waits of receives included, by procedure.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 30, 60}}, []string{"procedure"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_api_calls_in_flight",
			Help: "API calls in progress, waiting receives included."}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_sent_total",
			Help: "Messages sent through the API, by entity."}, []string{"entity"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_received_total",
			Help: "Messages received through the API, by entity and mode (peek_lock, receive_and_delete)."}, []string{"entity", "mode"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_settled_total",
			Help: "Messages settled through the API, by entity and action (complete, abandon, dead_letter, defer)."},
			[]string{"entity", "action"}),
		lockLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_lock_lost_total",
			Help: "Settlements and renewals refused because the message's or the session's lock was lost, by entity."},
			[]string{"entity"}),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_message_wait_seconds",
			Help:    "How long received messages had been in their entity, from send to receive, by entity.",
			Buckets: prometheus.ExponentialBuckets(.001, 4, 12)}, []string{"entity"}),
	}
	m.x = sluiceprom.New(s.c, &sluiceprom.Options{MaxEntities: maxScrapeEntities, SubscriptionLag: s.cfg.SubscriptionLagMetrics,
		OnEntity: m.startSeries})
	m.reg.MustRegister(m.calls, m.duration, m.inFlight, m.sent, m.received, m.settled, m.lockLost, m.waited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.x)
	return m
}

// maxScrapeEntities bounds the entities a scrape reads.
const maxScrapeEntities = 1000

// stopDead ends the observation of the library's dead-letterings.
func (m *metrics) stopDead() { m.x.Close() }

// Labels the series of an entity start with, so that each exists (at 0)
// before its first event: receive modes and settle actions.
var (
	receiveModes  = []string{"peek_lock", "receive_and_delete"}
	settleActions = []string{"complete", "abandon", "dead_letter", "defer"}
)

// startSeries makes the counters of an entity exist: a queue's or a
// subscription's all of them, a topic's (topic set) those of sends (the
// collector starts the dead-letter counters).
func (m *metrics) startSeries(entity string, topic bool) {
	label := m.entity(entity)
	m.sent.WithLabelValues(label)
	if topic {
		return
	}
	for _, mode := range receiveModes {
		m.received.WithLabelValues(label, mode)
	}
	for _, action := range settleActions {
		m.settled.WithLabelValues(label, action)
	}
	m.lockLost.WithLabelValues(label)
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

// entity is the label of an entity's name, in its canonical form (as
// the library's observers and listings name it, however a caller
// spelled it). Only entities that exist are labelled: a call names its
// entity in a metric only once its outcome shows that the entity exists
// (it succeeded, or lost a lock), and a deleted entity's label goes with
// its series (forgetEntity), so that calls on missing names, and
// throwaway queues such as the self-check's, never fill the labels
// (10,000, past which an entity counts as "_other").
func (m *metrics) entity(name string) string { return m.x.EntityLabel(name) }

// receivedMessages records messages a receive returned.
func (m *metrics) receivedMessages(entity string, mode sluice.ReceiveMode, msgs []*sluice.ReceivedMessage) {
	if len(msgs) == 0 {
		return
	}
	label := "peek_lock"
	if mode == sluice.ReceiveAndDelete {
		label = "receive_and_delete"
	}
	m.hist.count(entity, flowReceived, len(msgs))
	entity = m.entity(entity)
	m.received.WithLabelValues(entity, label).Add(float64(len(msgs)))
	m.tp.received.Add(int64(len(msgs)))
	now := time.Now()
	for _, msg := range msgs {
		if !msg.EnqueuedTime.IsZero() {
			m.waited.WithLabelValues(entity).Observe(max(now.Sub(msg.EnqueuedTime).Seconds(), 0))
		}
	}
}

// settledMessage records a settlement's outcome. Only a success or a
// lost lock names the entity: either shows that it exists (the library
// looks the entity up before it settles).
func (m *metrics) settledMessage(entity, action string, err error) {
	switch {
	case err == nil:
		m.settled.WithLabelValues(m.entity(entity), action).Inc()
		m.tp.settled.Add(1)
		m.hist.count(entity, flowSettled, 1)
	case isLockLost(err):
		m.lockLost.WithLabelValues(m.entity(entity)).Inc()
	}
}

// forgetEntity drops the series of a deleted entity, and of the
// subscriptions under it when it is a topic (under: their prefix), with
// their labels, and their history.
func (m *metrics) forgetEntity(name, under string) {
	m.hist.forget(name, under)
	for _, label := range m.x.ForgetEntity(name, under) {
		match := prometheus.Labels{"entity": label}
		for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.sent, m.received, m.settled, m.lockLost, m.waited} {
			v.DeletePartialMatch(match)
		}
	}
}

// settledBatch records a batch settlement of n messages, failed of which
// lost their locks.
func (m *metrics) settledBatch(entity, action string, n, failed int) {
	m.hist.count(entity, flowSettled, n-failed)
	entity = m.entity(entity)
	m.settled.WithLabelValues(entity, action).Add(float64(n - failed))
	m.tp.settled.Add(int64(n - failed))
	if failed > 0 {
		m.lockLost.WithLabelValues(entity).Add(float64(failed))
	}
}

// MetricsEntity is the name a grant names to let a key read /metrics
// with Manage ("*" covers it too).
const MetricsEntity = "$metrics"

// handler serves the metrics: to anyone without keys, else to a key that
// may manage MetricsEntity, authenticated as an API call is (Prometheus
// sends the token as "Authorization: Bearer <token>") and within the
// key's rate limit.
func (m *metrics) handler(s *Server) http.Handler {
	// The database's figures are read first: the read starts the series
	// of entities with no events yet, which this scrape then shows.
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		m.x.Refresh()
		return m.reg.Gather()
	})
	h := promhttp.HandlerFor(gather, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
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

func isLockLost(err error) bool {
	return errors.Is(err, sluice.ErrLockLost) || errors.Is(err, sluice.ErrSessionLockLost)
}
