package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aimi-tools/swarm/state"
	"github.com/aimi-tools/swarm/tasks"
)

// scrapeTimeout bounds how long a scrape waits for the orchestrator's view.
const scrapeTimeout = 2 * time.Second

var (
	containersDesc = prometheus.NewDesc("aimid_containers", "Containers the daemon holds, by status.", []string{"status"}, nil)
	storiesDesc    = prometheus.NewDesc("aimid_stories", "Stories of the containers' task files, by status as reported.", []string{"status"}, nil)
	swarmsDesc     = prometheus.NewDesc("aimid_swarms", "Swarms the daemon holds.", nil, nil)
)

// containerStatuses and storyStatuses are always reported (0 when none),
// so a dashboard's series exist from the first scrape.
var (
	containerStatuses = []string{string(state.StatusPending), string(state.StatusRunning), string(state.StatusCompleted), string(state.StatusFailed), string(state.StatusStopped)}
	storyStatuses     = []string{string(tasks.Pending), string(tasks.InProgress), string(tasks.Completed), string(tasks.Failed), string(tasks.Skipped)}
)

// swarmCollector computes the gauges from the orchestrator's view when
// scraped.
type swarmCollector struct{ src Source }

func (c *swarmCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- containersDesc
	ch <- storiesDesc
	ch <- swarmsDesc
}

func (c *swarmCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	views := c.src.List(ctx)
	ctrs := zeroed(containerStatuses)
	stories := zeroed(storyStatuses)
	for _, v := range views {
		for _, d := range v.Containers {
			ctrs[bounded(d.Status, ctrs)]++
			for _, s := range d.Stories {
				stories[bounded(s.Status, stories)]++
			}
		}
	}
	for s, n := range ctrs {
		ch <- prometheus.MustNewConstMetric(containersDesc, prometheus.GaugeValue, n, s)
	}
	for s, n := range stories {
		ch <- prometheus.MustNewConstMetric(storiesDesc, prometheus.GaugeValue, n, s)
	}
	ch <- prometheus.MustNewConstMetric(swarmsDesc, prometheus.GaugeValue, float64(len(views)))
}

func zeroed(keys []string) map[string]float64 {
	m := make(map[string]float64, len(keys)+1)
	for _, k := range keys {
		m[k] = 0
	}
	return m
}

// bounded maps a status a state file may spell any way to a known label.
func bounded(s string, known map[string]float64) string {
	if _, ok := known[s]; ok {
		return s
	}
	return "other"
}
