package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
)

// Source is what the metrics read from the orchestrator at scrape time.
type Source interface {
	// List returns every swarm the daemon holds, from memory.
	List(ctx context.Context) []api.SwarmView
	// Health returns nil when the daemon's loops answer.
	Health(ctx context.Context) error
}

// Metrics holds the daemon's registry and the counters its hooks feed.
type Metrics struct {
	reg *prometheus.Registry
	src Source

	messages     *prometheus.CounterVec // result, type
	engine       *prometheus.CounterVec // kind
	gitPushes    *prometheus.CounterVec // result
	journalBytes prometheus.Counter
	limitWaits   prometheus.Counter // containers' calls began waiting at the model gateway
	waiting      prometheus.Gauge   // containers whose calls wait there now
	stateSaves   prometheus.Histogram
	kinds        *kindSet
}

// New makes the registry with the process and Go collectors and the
// counters; Attach adds the swarm gauges and the health check once the
// orchestrator exists (it takes the counters' hooks when it is made).
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), kinds: newKindSet(maxKinds)}
	m.messages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aimid_messages_total",
		Help: "Container messages by result: journaled (valid, folded into the state), rejected (valid but refused by the story transition table or the spec's rules) or invalid (not a spec message).",
	}, []string{"result", "type"})
	m.engine = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aimid_engine_requests_total",
		Help: "Engine API requests by kind (method and path with ids replaced).",
	}, []string{"kind"})
	m.gitPushes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aimid_git_pushes_total",
		Help: "Pushes to the daemon's git service by result (accepted or refused).",
	}, []string{"result"})
	m.journalBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "aimid_journal_bytes_total",
		Help: "Bytes appended to container journals.",
	})
	m.limitWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "aimid_model_limit_waits_total",
		Help: "Waits of a container's model calls at the gateway (a provider's limit, max_concurrent, requests_per_minute; a wait for a place counts once it lasted a second).",
	})
	m.waiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "aimid_model_limit_waiting",
		Help: "Containers (per provider) whose model calls wait at the gateway now.",
	})
	m.stateSaves = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "aimid_state_save_lag_seconds",
		Help:    "State file saves, by how long the oldest change a save carries waited for it.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.messages, m.engine, m.gitPushes, m.journalBytes, m.stateSaves, m.limitWaits, m.waiting,
	)
	return m
}

// Attach makes src the source of the swarm gauges and of /healthz. Call it
// once, before Handler serves.
func (m *Metrics) Attach(src Source) {
	m.src = src
	m.reg.MustRegister(&swarmCollector{src: src})
}

// Registry is the registry the HTTP handler serves (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Event counts one orchestrator event. It runs synchronously on the
// goroutine that published the event.
func (m *Metrics) Event(e api.Event) {
	switch e.Kind {
	case api.EventProgress:
		m.messages.WithLabelValues("journaled", boundedType(e.MessageType)).Inc()
	case api.EventLineRejected:
		if e.MessageType == "" {
			m.messages.WithLabelValues("invalid", "").Inc()
		} else {
			m.messages.WithLabelValues("rejected", boundedType(e.MessageType)).Inc()
		}
	case api.EventLimitWait:
		m.limitWaits.Inc()
		m.waiting.Inc()
	case api.EventLimitWaitOver:
		m.waiting.Dec()
	}
}

// StateSaved records one state save and its lag.
func (m *Metrics) StateSaved(lag time.Duration) { m.stateSaves.Observe(lag.Seconds()) }

// JournalAppended counts bytes appended to a journal.
func (m *Metrics) JournalAppended(n int) { m.journalBytes.Add(float64(n)) }

// GitPush counts one push to the git service.
func (m *Metrics) GitPush(accepted bool) {
	if accepted {
		m.gitPushes.WithLabelValues("accepted").Inc()
	} else {
		m.gitPushes.WithLabelValues("refused").Inc()
	}
}

// boundedType keeps the label to the spec's four message types: anything
// else a container sends is one label value, so it cannot grow the series.
func boundedType(t string) string {
	switch acpmsg.Type(t) {
	case acpmsg.TypeTaskRequest, acpmsg.TypeProgressUpdate, acpmsg.TypeCompletion, acpmsg.TypeError:
		return t
	}
	return "other"
}
