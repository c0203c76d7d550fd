// Package sluiceprom exports a sluice client's figures to Prometheus: what
// its database holds (every entity's messages by state, dead letters by
// reason, the oldest messages' ages, the stream partitions' and
// consumers' lag), what the client's calls did to messages (sent,
// received, settled, locks lost, how long received messages waited),
// and every dead-lettering the client's process commits. The server
// serves the same metrics at /metrics, from this collector; a program
// that embeds the library registers a Collector with its own registry:
//
//	m := sluiceprom.New(client, nil)
//	prometheus.MustRegister(m)
//	defer m.Close()
//
// Its handler middleware times the program's handlers and counts how
// each delivery ended (ok, error, timeout, panic), on the same
// collector: Collector.MessageMiddleware for a queue Processor's handler
// (sluice_message_handler_seconds and sluice_messages_handled_total, by
// entity) and Collector.StreamMiddleware for a stream consumer's
// (sluice_stream_handler_seconds and sluice_stream_events_handled_total,
// by namespace), on the library's processors or the network client's:
//
//	p, _ := client.MessageProcessor("orders", handle, &sluice.ProcessorOptions{
//		MessageMiddleware: []sluice.MessageMiddleware{m.MessageMiddleware(), sluice.TimeoutMessage(time.Minute)},
//	})
//
// It is a package of its own so that a program that does not use it does
// not link Prometheus.
package sluiceprom

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// Options configure a Collector. Zero values take the defaults.
type Options struct {
	// MaxEntities bounds the entities one read of the database covers
	// (default 1,000, listed in one walk).
	MaxEntities int
	// Fresh is how long the figures of one read serve collections
	// (default 5 s): any number of scrapers within it cost the database
	// one read.
	Fresh time.Duration
	// SubscriptionLag adds a series per stream subscription and partition
	// (sluice_stream_subscription_lag); without it lag is summed per
	// consumer and namespace.
	SubscriptionLag bool
	// MaxLabels bounds the entity names, dead-letter reasons and stream
	// namespaces the counters label (default 10,000 each); past it they
	// count as "_other". (The gauges of the database's figures are
	// bounded by MaxEntities: they hold what one read found.)
	MaxLabels int
}

// Collector is a prometheus.Collector of a client's figures. Its methods
// are safe for concurrent use.
//
// Its counters of messages count the calls of the client it was given
// (sluice.Client.ObserveMessages), whatever the path: a Sender, a
// Receiver in either mode, a SessionReceiver, a Processor, a server's API
// calls. A receive or settlement of an entity's dead letters counts under
// the entity, as the server always counted it. An entity is labelled
// only once a call's outcome shows that it exists (the client reports
// successes and lost locks, never a call on a missing name), and each
// entity a read of the database finds gets its series at 0.
type Collector struct {
	c        *sluice.Client
	opts     Options
	entities labelSet
	reasons  labelSet
	// namespaces label the stream handlers' series.
	namespaces labelSet
	dead       *prometheus.CounterVec
	sent       *prometheus.CounterVec
	received   *prometheus.CounterVec
	settled    *prometheus.CounterVec
	lockLost   *prometheus.CounterVec
	waited     *prometheus.HistogramVec
	// The handler middleware's series (middleware.go).
	handled        *prometheus.CounterVec
	handlerSeconds *prometheus.HistogramVec
	streamHandled  *prometheus.CounterVec
	streamSeconds  *prometheus.HistogramVec
	stopDead       func()
	stopMsgs       func()

	mu   sync.Mutex // held while reading
	last []prometheus.Metric
	snap Snapshot // what the last read found, and when
}

// New returns a collector of c's figures; it observes c's dead-letterings
// and its calls' messages until Close.
func New(c *sluice.Client, opts *Options) *Collector {
	x := &Collector{c: c}
	if opts != nil {
		x.opts = *opts
	}
	if x.opts.MaxEntities <= 0 {
		x.opts.MaxEntities = 1000
	}
	if x.opts.Fresh <= 0 {
		x.opts.Fresh = 5 * time.Second
	}
	if x.opts.MaxLabels <= 0 {
		x.opts.MaxLabels = 10000
	}
	x.entities.max, x.reasons.max, x.namespaces.max = x.opts.MaxLabels, x.opts.MaxLabels, x.opts.MaxLabels
	x.dead = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_dead_lettered_total",
		Help: "Messages this process dead-lettered, by entity and reason, whatever the cause: a receiver's reason, " +
			"MaxDeliveryCountExceeded, TTLExpiredException, FilterEvaluationException."}, []string{"entity", "reason"})
	x.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_sent_total",
		Help: "Messages this process's calls sent, by entity, whatever the path (library, API)."}, []string{"entity"})
	x.received = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_received_total",
		Help: "Messages this process's calls received, by entity and mode (peek_lock, receive_and_delete), " +
			"whatever the path (library, processor, API)."}, []string{"entity", "mode"})
	x.settled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_messages_settled_total",
		Help: "Messages this process's calls settled, by entity and action (complete, abandon, dead_letter, defer), " +
			"whatever the path (library, processor, API)."}, []string{"entity", "action"})
	x.lockLost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_lock_lost_total",
		Help: "Settlements and renewals of this process refused because the message's or the session's lock was lost, " +
			"by entity."}, []string{"entity"})
	x.waited = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_message_wait_seconds",
		Help:    "How long the messages this process's calls received had been in their entity, from send to receive, by entity.",
		Buckets: prometheus.ExponentialBuckets(.001, 4, 12)}, []string{"entity"})
	x.newHandlerMetrics()
	x.stopDead = c.ObserveDeadLetters(func(entity, reason string, n int) {
		x.dead.WithLabelValues(x.EntityLabel(entity), x.reasons.label(reason)).Add(float64(n))
	})
	x.stopMsgs = c.ObserveMessages(x.observe)
	return x
}

// observe counts what a call of the client did to messages.
func (x *Collector) observe(e sluice.MessageEvent) {
	entity, n := x.EntityLabel(e.Entity), float64(e.Count)
	switch e.Kind {
	case sluice.MessagesSent:
		x.sent.WithLabelValues(entity).Add(n)
	case sluice.MessagesReceived:
		x.received.WithLabelValues(entity, modeLabel(e.Mode)).Add(n)
		waited, now := x.waited.WithLabelValues(entity), time.Now()
		for _, at := range e.EnqueuedTimes {
			if !at.IsZero() {
				waited.Observe(max(now.Sub(at).Seconds(), 0))
			}
		}
	case sluice.MessagesSettled:
		x.settled.WithLabelValues(entity, e.Action.String()).Add(n)
	case sluice.LocksLost:
		x.lockLost.WithLabelValues(entity).Add(n)
	}
}

// modeLabel names a receive mode in a label.
func modeLabel(m sluice.ReceiveMode) string {
	if m == sluice.ReceiveAndDelete {
		return "receive_and_delete"
	}
	return "peek_lock"
}

// Close stops observing the client's dead-letterings and calls.
func (x *Collector) Close() {
	x.stopDead()
	x.stopMsgs()
}

// EntityLabel is the label of an entity's name: its canonical form
// (however a caller spelled it), or "_other" once MaxLabels names are
// labelled.
func (x *Collector) EntityLabel(name string) string {
	return x.entities.label(sluice.CanonicalName(name))
}

// ForgetEntity drops the series of a deleted entity, and of the
// subscriptions under it when it is a topic (under: their prefix), and
// returns the labels it dropped, for a caller's own series of them. A
// program that deletes entities calls it, so that their counters (and
// their labels, of the MaxLabels) go with them.
func (x *Collector) ForgetEntity(name, under string) []string {
	if under != "" {
		under = sluice.CanonicalName(under)
	}
	labels := x.entities.forget(sluice.CanonicalName(name), under)
	for _, l := range labels {
		match := prometheus.Labels{"entity": l}
		for _, v := range x.vecs() {
			v.DeletePartialMatch(match)
		}
	}
	return labels
}

// vec is a metric vector: a counter's or a histogram's.
type vec interface {
	prometheus.Collector
	DeletePartialMatch(prometheus.Labels) int
}

// vecs are the collector's series by entity.
func (x *Collector) vecs() []vec {
	return []vec{x.dead, x.sent, x.received, x.settled, x.lockLost, x.waited, x.handled, x.handlerSeconds}
}

// allVecs are the collector's series: by entity, then by namespace.
func (x *Collector) allVecs() []vec {
	return append(x.vecs(), x.streamHandled, x.streamSeconds)
}

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
		"Records of a stream partition past a subscription's stored position (with SubscriptionLag).",
		[]string{"subscription", "consumer", "namespace", "partition"}, nil)
	nodesDesc = prometheus.NewDesc("sluice_stream_nodes",
		"Registered stream nodes, by liveness.", []string{"alive"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc("sluice_scrape_errors",
		"Reads of the database this scrape could not make (1: the figures above are partial).", nil, nil)
)

// Describe implements prometheus.Collector.
func (x *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{entityMessagesDesc, entityDeadLettersDesc, entityOldestDesc, partitionLagDesc,
		consumerLagDesc, consumerProcessorsDesc, subscriptionLagDesc, nodesDesc, scrapeErrorsDesc} {
		ch <- d
	}
	for _, v := range x.allVecs() {
		v.Describe(ch)
	}
}

// Collect implements prometheus.Collector: the figures of the last read
// (reading again once they are older than Options.Fresh), then the
// counters, with the series of every entity that read found at 0.
func (x *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range x.refresh() {
		ch <- m
	}
	for _, v := range x.allVecs() {
		v.Collect(ch)
	}
}

// refresh returns the figures of the last read, reading them again once
// they are older than Options.Fresh; collections that come while it
// reads wait for its figures.
func (x *Collector) refresh() []prometheus.Metric {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.last == nil || time.Since(x.snap.At) >= x.opts.Fresh {
		x.last, x.snap = x.read()
	}
	return slices.Clone(x.last)
}

// Snapshot is what one read of the database found, as values: the
// figures the collector's gauges of entities and stream lag report.
type Snapshot struct {
	// At is when the read ended.
	At time.Time
	// Entities are the queues and subscriptions the read counted, up to
	// Options.MaxEntities, in name order.
	Entities []EntityStats
	// EntitiesComplete: the listing and every listed entity's counts
	// were read (an entity deleted meanwhile is left out). Otherwise
	// Entities holds what could be read, and an entity missing from it
	// may still exist.
	EntitiesComplete bool
	// Cluster is the stream cluster's status, when ClusterRead.
	Cluster     sluice.ClusterStatus
	ClusterRead bool
}

// EntityStats is a queue's or a subscription's counts.
type EntityStats struct {
	// Path is the queue's name or the subscription's path, in canonical
	// form; Topic is the subscription's topic ("" for a queue).
	Path, Topic string
	Stats       sluice.QueueStats
}

// Snapshot returns the entities' counts and the cluster's status: those
// the collections' last read found if it ended within maxAge, else a
// read of its own (for at most 10 s, or until ctx ends). A program that
// samples the figures and is scraped thus reads the database once for
// both when the scrapes come often enough. A read of its own serves
// only its caller, and reads only the counts and the status (no
// dead-letter reasons, no topics): what collections report stays as
// fresh as Options.Fresh says.
func (x *Collector) Snapshot(ctx context.Context, maxAge time.Duration) Snapshot {
	x.mu.Lock()
	if x.last != nil && time.Since(x.snap.At) < maxAge {
		defer x.mu.Unlock()
		return x.snap
	}
	x.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	snap, _ := x.readSnapshot(ctx)
	return snap
}

// readTimeout bounds a read of the database's figures.
const readTimeout = 10 * time.Second

// readSnapshot reads the entities' counts and the cluster's status, and
// counts the reads that failed (an entity deleted since the listing
// counts too).
func (x *Collector) readSnapshot(ctx context.Context) (snap Snapshot, failed int) {
	es, err := x.c.ListMessageEntities(ctx, "", "", x.opts.MaxEntities)
	if err != nil {
		failed++
	}
	snap.EntitiesComplete = err == nil
	for _, e := range es {
		st, err := x.c.GetQueueStats(ctx, e.Path)
		if err != nil {
			failed++ // or deleted since the listing: no series for it
			if !errors.Is(err, sluice.ErrEntityNotFound) {
				snap.EntitiesComplete = false
			}
			continue
		}
		snap.Entities = append(snap.Entities, EntityStats{Path: e.Path, Topic: e.Topic, Stats: st})
	}
	snap.Cluster, err = x.c.ClusterStatus(ctx)
	if err != nil {
		failed++
	}
	snap.ClusterRead = err == nil
	snap.At = time.Now()
	return snap, failed
}

// sluiceReasons are the dead-letter reasons sluice assigns: each
// entity's counter starts at 0 with them.
var sluiceReasons = []string{sluice.ReasonMaxDeliveryCountExceeded, sluice.ReasonTTLExpired}

// read reads the figures from the database: the snapshot, then each
// entity's dead letters by reason and (for OnEntity) the topics.
func (x *Collector) read() ([]prometheus.Metric, Snapshot) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	snap, failed := x.readSnapshot(ctx)
	var out []prometheus.Metric
	emit := func(m prometheus.Metric) { out = append(out, m) }
	for _, e := range snap.Entities {
		entity, st := e.Path, e.Stats
		x.startSeries(entity)
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
			reasons, err := x.c.DeadLetterReasons(ctx, entity)
			if err != nil {
				failed++
				continue
			}
			// Reasons past the label bound add up under "_other".
			byLabel := make(map[string]int64, len(reasons))
			for r, n := range reasons {
				byLabel[x.reasons.label(r)] += n
			}
			for r, n := range byLabel {
				emit(prometheus.MustNewConstMetric(entityDeadLettersDesc, prometheus.GaugeValue, float64(n), entity, r))
			}
		}
	}
	topics, err := x.c.ListTopics(ctx, "", x.opts.MaxEntities)
	if err != nil {
		failed++
	}
	for _, t := range topics {
		if _, err := x.c.GetTopic(ctx, t.Name); err == nil { // not deleted since
			x.sent.WithLabelValues(x.EntityLabel(t.Name))
		}
	}
	cs := snap.Cluster
	alive := map[bool]int{}
	for _, n := range cs.Nodes {
		alive[n.Alive]++
	}
	for _, a := range []bool{true, false} {
		emit(prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(alive[a]), strconv.FormatBool(a)))
	}
	out = append(out, x.streamLag(cs)...)
	emit(prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, float64(failed)))
	return out, snap
}

// Labels the series of a queue or subscription start with, so that each
// exists (at 0) before its first event: receive modes and settle
// actions.
var (
	receiveModes  = []sluice.ReceiveMode{sluice.PeekLock, sluice.ReceiveAndDelete}
	settleActions = []sluice.SettleAction{sluice.SettleComplete, sluice.SettleAbandon, sluice.SettleDeadLetter, sluice.SettleDefer}
)

// startSeries makes the counters of a queue or subscription exist at 0:
// messages by mode and action, lost locks, and dead-letterings with the
// reasons sluice assigns. (A topic's, of sends only, start in read.)
func (x *Collector) startSeries(entity string) {
	label := x.EntityLabel(entity)
	for _, reason := range sluiceReasons {
		x.dead.WithLabelValues(label, x.reasons.label(reason))
	}
	if strings.Contains(entity, sluice.SubscriptionPath("", "")) {
		x.dead.WithLabelValues(label, x.reasons.label(sluice.ReasonFilterEvaluation))
	}
	x.sent.WithLabelValues(label)
	for _, mode := range receiveModes {
		x.received.WithLabelValues(label, modeLabel(mode))
	}
	for _, action := range settleActions {
		x.settled.WithLabelValues(label, action.String())
	}
	x.lockLost.WithLabelValues(label)
}

// streamLag is the lag of each partition, of each consumer in each
// namespace (and with SubscriptionLag of each subscription on each
// partition), and how many live processors serve each consumer.
func (x *Collector) streamLag(cs sluice.ClusterStatus) []prometheus.Metric {
	var out []prometheus.Metric
	for _, p := range cs.Partitions {
		part := strconv.Itoa(int(p.Partition))
		out = append(out, prometheus.MustNewConstMetric(partitionLagDesc, prometheus.GaugeValue, float64(p.Lag), part))
		if !x.opts.SubscriptionLag {
			continue
		}
		for _, s := range p.Subscriptions {
			if s.Consumer != "" { // else created or deleted while the status was read
				out = append(out, prometheus.MustNewConstMetric(subscriptionLagDesc, prometheus.GaugeValue, float64(s.Lag),
					s.ID, s.Consumer, s.Namespace, part))
			}
		}
	}
	serving := map[string]int{}
	for _, l := range ConsumerLags(cs) {
		serving[l.Consumer] = l.Processors
		out = append(out, prometheus.MustNewConstMetric(consumerLagDesc, prometheus.GaugeValue, float64(l.Lag),
			groupLabel(l.Group), l.Consumer, l.Namespace))
	}
	for consumer, n := range serving {
		out = append(out, prometheus.MustNewConstMetric(consumerProcessorsDesc, prometheus.GaugeValue, float64(n),
			groupLabel(consumerGroup(cs, consumer)), consumer))
	}
	return out
}

// ConsumerLag is a consumer's lag in a namespace: the records past the
// stored positions of its subscriptions there, summed over them and
// their partitions (the metric sluice_stream_consumer_lag).
type ConsumerLag struct {
	// Group is the group of the live processors serving the consumer
	// ("" for the default group); for a consumer none serves, that of a
	// dead node that named it, if any, else "".
	Group, Consumer, Namespace string
	Lag                        int64
	// Processors counts the live processors (nodes) serving the
	// consumer: 0, and its subscriptions hold their partitions'
	// checkpoints and retention back.
	Processors int
}

// ConsumerLags sums a cluster status's lag per consumer and namespace,
// in no particular order. A subscription created or deleted while the
// status was read (no consumer) counts for none.
func ConsumerLags(cs sluice.ClusterStatus) []ConsumerLag {
	type consumerNS struct{ consumer, namespace string }
	lag := map[consumerNS]int64{}
	for _, p := range cs.Partitions {
		for _, s := range p.Subscriptions {
			if s.Consumer != "" {
				lag[consumerNS{s.Consumer, s.Namespace}] += s.Lag
			}
		}
	}
	serving := map[string]int{} // consumer -> live nodes serving it
	for _, n := range cs.Nodes {
		for _, consumer := range n.Consumers {
			if n.Alive {
				serving[consumer]++
			}
		}
	}
	out := make([]ConsumerLag, 0, len(lag))
	for k, n := range lag {
		out = append(out, ConsumerLag{Group: consumerGroup(cs, k.consumer), Consumer: k.consumer, Namespace: k.namespace, Lag: n,
			Processors: serving[k.consumer]})
	}
	return out
}

// consumerGroup is the group of the live nodes serving a consumer (a
// consumer runs in one group at a time), else of the first node that
// names it, else "".
func consumerGroup(cs sluice.ClusterStatus, consumer string) string {
	group, found := "", false
	for _, n := range cs.Nodes {
		if slices.Contains(n.Consumers, consumer) && (!found || n.Alive) {
			group, found = n.Group, true
			if n.Alive {
				return group
			}
		}
	}
	return group
}

// groupLabel names a processor group in a label: "default" for the
// default group's "".
func groupLabel(g string) string {
	if g == "" {
		return "default"
	}
	return g
}

// labelSet admits label values up to a bound: past it a value counts as
// "_other", so that ever new names cannot grow the metrics without
// bound.
type labelSet struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

func (l *labelSet) label(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if len(l.seen) >= l.max {
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
