package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice"
)

// metrics are the server's Prometheus metrics, served at /metrics: the
// calls it serves, what they did to messages, the stream caches of the
// consumers it runs (cacheCollector), and, read from the database at
// each scrape, the entities' depths and the stream partitions' lag.
type metrics struct {
	tp       *throughput
	entities labelSet // entity names
	reasons  labelSet // dead-letter reasons
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	sent     *prometheus.CounterVec
	received *prometheus.CounterVec
	settled  *prometheus.CounterVec
	lockLost *prometheus.CounterVec
	dead     *prometheus.CounterVec
	waited   *prometheus.HistogramVec
	// stopDead ends the observation of the library's dead-letterings.
	stopDead func()
	state    *stateCollector
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		tp:    &s.tp,
		state: &stateCollector{s: s},
		reg:   prometheus.NewRegistry(),
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
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_dead_lettered_total",
			Help: "Messages this server's process dead-lettered, by entity and reason, whatever the cause: a receiver's reason, " +
				"MaxDeliveryCountExceeded, TTLExpiredException, FilterEvaluationException."}, []string{"entity", "reason"}),
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_message_wait_seconds",
			Help:    "How long received messages had been in their entity, from send to receive, by entity.",
			Buckets: prometheus.ExponentialBuckets(.001, 4, 12)}, []string{"entity"}),
	}
	m.reg.MustRegister(m.calls, m.duration, m.inFlight, m.sent, m.received, m.settled, m.lockLost, m.dead, m.waited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.state)
	m.stopDead = s.c.ObserveDeadLetters(func(entity, reason string, n int) {
		m.dead.WithLabelValues(m.entity(entity), m.reasons.label(reason)).Add(float64(n))
	})
	return m
}

// Labels the series of an entity start with, so that each exists (at 0)
// before its first event: receive modes, settle actions, and the reasons
// sluice dead-letters for.
var (
	receiveModes     = []string{"peek_lock", "receive_and_delete"}
	settleActions    = []string{"complete", "abandon", "dead_letter", "defer"}
	sluiceDeadReason = []string{sluice.ReasonMaxDeliveryCountExceeded, sluice.ReasonTTLExpired}
)

// startSeries makes the counters of an entity exist: a queue's or a
// subscription's all of them, a topic's (topic set) those of sends.
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
	for _, reason := range sluiceDeadReason {
		m.dead.WithLabelValues(label, m.reasons.label(reason))
	}
	if strings.Contains(entity, sluice.SubscriptionPath("", "")) {
		m.dead.WithLabelValues(label, m.reasons.label(sluice.ReasonFilterEvaluation))
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

// maxEntityLabels bounds the entity names the metrics label: beyond it,
// an entity counts as "_other", so that callers naming ever new entities
// cannot grow the metrics without bound. Only entities that exist are
// labelled: a call names its entity in a metric only once its outcome
// shows that the entity exists (it succeeded, or lost a lock), and a
// deleted entity's label goes with its series (forgetEntity), so that
// calls on missing names, and throwaway queues such as the self-check's,
// never fill the set.
const maxEntityLabels = 10000

// labelSet admits label values up to a bound.
type labelSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *labelSet) label(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if len(l.seen) >= maxEntityLabels {
		return "_other"
	}
	if l.seen == nil {
		l.seen = make(map[string]bool)
	}
	l.seen[v] = true
	return v
}

// forget drops the values that are v or, with under set, start with
// under, and returns them.
func (l *labelSet) forget(v, under string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for s := range l.seen {
		if s == v || under != "" && strings.HasPrefix(s, under) {
			delete(l.seen, s)
			out = append(out, s)
		}
	}
	return out
}

// entity is the label of an entity's name, in its canonical form (as
// the library's observers and listings name it, however a caller
// spelled it).
func (m *metrics) entity(name string) string { return m.entities.label(sluice.CanonicalName(name)) }

// receivedMessages records messages a receive returned.
func (m *metrics) receivedMessages(entity string, mode sluice.ReceiveMode, msgs []*sluice.ReceivedMessage) {
	if len(msgs) == 0 {
		return
	}
	label := "peek_lock"
	if mode == sluice.ReceiveAndDelete {
		label = "receive_and_delete"
	}
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
	case isLockLost(err):
		m.lockLost.WithLabelValues(m.entity(entity)).Inc()
	}
}

// forgetEntity drops the series of a deleted entity, and of the
// subscriptions under it when it is a topic (under: their prefix), with
// their labels.
func (m *metrics) forgetEntity(name, under string) {
	if under != "" {
		under = sluice.CanonicalName(under)
	}
	for _, label := range m.entities.forget(sluice.CanonicalName(name), under) {
		match := prometheus.Labels{"entity": label}
		for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.sent, m.received, m.settled, m.lockLost, m.dead, m.waited} {
			v.DeletePartialMatch(match)
		}
	}
}

// settledBatch records a batch settlement of n messages, failed of which
// lost their locks.
func (m *metrics) settledBatch(entity, action string, n, failed int) {
	entity = m.entity(entity)
	m.settled.WithLabelValues(entity, action).Add(float64(n - failed))
	m.tp.settled.Add(int64(n - failed))
	if failed > 0 {
		m.lockLost.WithLabelValues(entity).Add(float64(failed))
	}
}

// stateCollector reads the depth of every entity (up to
// maxScrapeEntities) and the lag of every stream partition and
// subscription from the database, at most once per stateFresh: scrapes
// within it, and scrapes that come while it reads, get the figures of
// the last read, so that a scrape costs at most one read of the database
// however many ask.
type stateCollector struct {
	s *Server

	mu   sync.Mutex // held while reading
	at   time.Time  // when last read
	last []prometheus.Metric
}

// maxScrapeEntities bounds the entities a scrape reads; stateFresh is
// how long the figures read serve scrapes.
const (
	maxScrapeEntities = 1000
	stateFresh        = 5 * time.Second
)

var (
	entityMessagesDesc = prometheus.NewDesc("sluice_entity_messages",
		"Messages of a queue or subscription by state (active, expired, scheduled, in_flight, deferred, dead_lettered).",
		[]string{"entity", "state"}, nil)
	entityDeadLettersDesc = prometheus.NewDesc("sluice_entity_dead_letters",
		"Dead letters of a queue or subscription by reason (MaxDeliveryCountExceeded, TTLExpiredException, "+
			"or a receiver's), however they were dead-lettered.", []string{"entity", "reason"}, nil)
	entityOldestDesc = prometheus.NewDesc("sluice_entity_oldest_message_age_seconds",
		"How long the oldest message of a queue or subscription in a state (active, deferred) has been in it; "+
			"0 with none.", []string{"entity", "state"}, nil)
	partitionLagDesc = prometheus.NewDesc("sluice_stream_partition_lag",
		"Records of a stream partition past its checkpoint.", []string{"partition"}, nil)
	consumerLagDesc = prometheus.NewDesc("sluice_stream_consumer_lag",
		"Records past the stored positions of a consumer's subscriptions in a namespace, summed over its subscriptions "+
			"and partitions; group is the processor group serving it.", []string{"group", "consumer", "namespace"}, nil)
	consumerProcessorsDesc = prometheus.NewDesc("sluice_stream_consumer_processors",
		"Live stream processors (nodes) serving a consumer that has subscriptions; 0: none does, and its subscriptions "+
			"hold their partitions' checkpoints and retention back.", []string{"group", "consumer"}, nil)
	subscriptionLagDesc = prometheus.NewDesc("sluice_stream_subscription_lag",
		"Records of a stream partition past a subscription's stored position (with the server's "+
			"SubscriptionLagMetrics).", []string{"subscription", "consumer", "namespace", "partition"}, nil)
	nodesDesc = prometheus.NewDesc("sluice_stream_nodes",
		"Registered stream nodes, by liveness.", []string{"alive"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc("sluice_scrape_errors",
		"Reads of the database this scrape could not make (1: the figures above are partial).", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{entityMessagesDesc, entityDeadLettersDesc, entityOldestDesc, partitionLagDesc,
		consumerLagDesc, consumerProcessorsDesc, subscriptionLagDesc, nodesDesc, scrapeErrorsDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.figures() {
		ch <- m
	}
}

// figures returns the last figures read, reading them again once they
// are older than stateFresh.
func (c *stateCollector) figures() []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || time.Since(c.at) >= stateFresh {
		c.last = c.read()
		c.at = time.Now()
	}
	return c.last
}

// read reads the figures from the database.
func (c *stateCollector) read() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []prometheus.Metric
	emit := func(m prometheus.Metric) { out = append(out, m) }
	failed := 0
	for _, entity := range c.entities(ctx, &failed) {
		st, err := c.s.c.GetQueueStats(ctx, entity)
		if err != nil {
			failed++ // or deleted since the listing: no series for it
			continue
		}
		c.s.m.startSeries(entity, false)
		for _, v := range []struct {
			state string
			n     int64
		}{{"active", st.Active}, {"expired", st.Expired}, {"scheduled", st.Scheduled}, {"in_flight", st.InFlight},
			{"deferred", st.Deferred}, {"dead_lettered", st.DeadLettered}} {
			emit(prometheus.MustNewConstMetric(entityMessagesDesc, prometheus.GaugeValue, float64(v.n), entity, v.state))
		}
		emit(prometheus.MustNewConstMetric(entityOldestDesc, prometheus.GaugeValue, st.OldestAge.Seconds(), entity, "active"))
		emit(prometheus.MustNewConstMetric(entityOldestDesc, prometheus.GaugeValue, st.OldestDeferredAge.Seconds(), entity, "deferred"))
		if st.DeadLettered > 0 {
			reasons, err := c.s.c.DeadLetterReasons(ctx, entity)
			if err != nil {
				failed++
				continue
			}
			// Reasons past the label bound add up under "_other".
			byLabel := make(map[string]int64, len(reasons))
			for r, n := range reasons {
				byLabel[c.s.m.reasons.label(r)] += n
			}
			for r, n := range byLabel {
				emit(prometheus.MustNewConstMetric(entityDeadLettersDesc, prometheus.GaugeValue, float64(n), entity, r))
			}
		}
	}
	topics, err := c.s.c.ListTopics(ctx, "", maxScrapeEntities)
	if err != nil {
		failed++
	}
	for _, t := range topics {
		if _, err := c.s.c.GetTopic(ctx, t.Name); err == nil { // not deleted since
			c.s.m.startSeries(t.Name, true)
		}
	}
	cs, err := c.s.c.ClusterStatus(ctx)
	if err != nil {
		failed++
	}
	alive := map[bool]int{}
	for _, n := range cs.Nodes {
		alive[n.Alive]++
	}
	for _, a := range []bool{true, false} {
		emit(prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(alive[a]), strconv.FormatBool(a)))
	}
	for _, m := range c.streamLag(cs) {
		emit(m)
	}
	emit(prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, float64(failed)))
	return out
}

// streamLag is the lag of each partition, of each consumer in each
// namespace (and with SubscriptionLagMetrics of each subscription on
// each partition), and how many live processors serve each consumer.
func (c *stateCollector) streamLag(cs sluice.ClusterStatus) []prometheus.Metric {
	type consumerNS struct{ consumer, namespace string }
	group := map[string]string{} // consumer -> the group of the live nodes serving it
	serving := map[string]int{}  // consumer -> live nodes serving it
	for _, n := range cs.Nodes {
		for _, consumer := range n.Consumers {
			if _, ok := group[consumer]; !ok || n.Alive {
				group[consumer] = n.Group
			}
			if n.Alive {
				serving[consumer]++
			}
		}
	}
	var out []prometheus.Metric
	lag := map[consumerNS]int64{}
	for _, p := range cs.Partitions {
		part := strconv.Itoa(int(p.Partition))
		out = append(out, prometheus.MustNewConstMetric(partitionLagDesc, prometheus.GaugeValue, float64(p.Lag), part))
		for _, s := range p.Subscriptions {
			if s.Consumer == "" {
				continue // deleted while the status was read
			}
			lag[consumerNS{s.Consumer, s.Namespace}] += s.Lag
			if c.s.cfg.SubscriptionLagMetrics {
				out = append(out, prometheus.MustNewConstMetric(subscriptionLagDesc, prometheus.GaugeValue, float64(s.Lag),
					s.ID, s.Consumer, s.Namespace, part))
			}
		}
	}
	consumers := map[string]bool{}
	for k, n := range lag {
		consumers[k.consumer] = true
		out = append(out, prometheus.MustNewConstMetric(consumerLagDesc, prometheus.GaugeValue, float64(n),
			groupLabel(group[k.consumer]), k.consumer, k.namespace))
	}
	for consumer := range consumers {
		out = append(out, prometheus.MustNewConstMetric(consumerProcessorsDesc, prometheus.GaugeValue, float64(serving[consumer]),
			groupLabel(group[consumer]), consumer))
	}
	return out
}

// groupLabel names a processor group in a label: "default" for the
// default group's "".
func groupLabel(g string) string {
	if g == "" {
		return "default"
	}
	return g
}

// entities lists the queues and the topics' subscriptions, up to
// maxScrapeEntities of them, in one walk of the entities' names.
func (c *stateCollector) entities(ctx context.Context, failed *int) []string {
	es, err := c.s.c.ListMessageEntities(ctx, "", "", maxScrapeEntities)
	if err != nil {
		*failed++
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Path
	}
	return out
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
		m.state.figures()
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
