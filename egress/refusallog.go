package egress

import (
	"log/slog"
	"sync"
	"time"
)

// Defaults of the refusal log: a sandbox refused again and again (a
// package manager retrying, a loop) would otherwise write a line a
// refusal: 5,000 in 2 s were 892 KiB of the daemon's log.
const (
	logFirst    = 5           // refusals of one container logged one by one in an interval
	logInterval = time.Minute // after which the rest are summed up in one line
)

// refusalLog logs a container's first refusals of each interval one by
// one and sums the rest up in one line when the interval ends. It holds
// one entry per container refused in the current interval.
type refusalLog struct {
	log      *slog.Logger
	first    int
	interval time.Duration

	mu   sync.Mutex
	cont map[string]*refusals
}

// refusals are one container's in the current interval.
type refusals struct {
	logged, more int
	since        time.Time
}

func newRefusalLog(log *slog.Logger, first int, interval time.Duration) *refusalLog {
	if first <= 0 {
		first = logFirst
	}
	if interval <= 0 {
		interval = logInterval
	}
	return &refusalLog{log: log, first: first, interval: interval, cont: map[string]*refusals{}}
}

// note logs d, or counts it when its container had its share of lines in
// this interval.
func (l *refusalLog) note(d Denial) {
	l.mu.Lock()
	r := l.cont[d.Container]
	if r == nil {
		r = &refusals{since: time.Now()}
		l.cont[d.Container] = r
		time.AfterFunc(l.interval, func() { l.sum(d.Container) })
	}
	show := r.logged < l.first
	if show {
		r.logged++
	} else {
		r.more++
	}
	l.mu.Unlock()
	if show {
		l.log.Info("egress denied", "container", d.Container, "method", d.Method, "host", d.Host, "port", d.Port, "reason", d.Reason)
	}
}

// sum ends a container's interval: the refusals it did not log are one
// line.
func (l *refusalLog) sum(container string) {
	l.mu.Lock()
	r := l.cont[container]
	delete(l.cont, container)
	l.mu.Unlock()
	if r != nil && r.more > 0 {
		// The journal has them (egress-denied, one per method, host and
		// port every ten seconds).
		l.log.Info("more egress refusals", "container", container, "more", r.more, "in", time.Since(r.since).Round(time.Second).String())
	}
}
