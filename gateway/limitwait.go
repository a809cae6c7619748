package gateway

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Why a container's calls wait at the gateway (Wait.Reason).
const (
	WaitLimit         = "limit"               // the provider's limit, until its reset
	WaitConcurrency   = "max_concurrent"      // models.<provider>.max_concurrent calls are in flight
	WaitPerMinute     = "requests_per_minute" // models.<provider>.requests_per_minute calls began in the last minute
	waitReportedAfter = time.Second           // a wait for a place is told once it lasted this long
)

// Wait is one container waiting at the gateway for one provider: at least
// one of its calls is held there.
type Wait struct {
	Swarm, Container string
	Provider         string
	// Reason is WaitLimit, WaitConcurrency or WaitPerMinute: why the
	// calls are held now (a wait for a limit's reset may go on as a wait
	// for a place).
	Reason string
	// Until is the limit's reset (Reason WaitLimit); zero otherwise.
	Until time.Time
	// Bound is max_concurrent or requests_per_minute for those reasons.
	Bound int
	// Since is when the first of the calls began waiting; Calls how many
	// wait now.
	Since time.Time
	Calls int
}

// String is the wait as status shows it: "waiting for anthropic limit
// until 15:04:05" (the daemon's local time), "waiting for a anthropic
// call slot (max_concurrent 4)".
func (w Wait) String() string {
	switch w.Reason {
	case WaitLimit:
		return "waiting for " + w.Provider + " limit until " + w.Until.Local().Format(time.TimeOnly)
	case WaitConcurrency, WaitPerMinute:
		if w.Bound <= 0 { // behind calls queued before it, as they go
			return "waiting for a " + w.Provider + " call slot"
		}
		return fmt.Sprintf("waiting for a %s call slot (%s %d)", w.Provider, w.Reason, w.Bound)
	}
	return "waiting for " + w.Provider
}

// WaitNote tells that a wait began (Ended zero) or ended. A wait for the
// provider's limit is told at once; a wait for a place only once it
// lasted a second (calls that queue for a moment behind max_concurrent
// are no news), and its end only when its beginning was told.
type WaitNote struct {
	Wait
	Ended time.Time
}

// String is the note as the journal holds it.
func (n WaitNote) String() string {
	if n.Ended.IsZero() {
		return n.Wait.String()
	}
	return fmt.Sprintf("the wait for %s is over after %s; the calls go on", n.Provider, n.Ended.Sub(n.Since).Round(time.Second))
}

// WaitObserver hears when a container's calls begin and end waiting at
// the gateway. An Observer that also implements it gets the notes; like
// Begin, Wait must not block.
type WaitObserver interface {
	Waited(WaitNote)
}

type waitKey struct {
	gate gateKey
	who
}

// waiting is one container's calls held at one gate.
type waiting struct {
	g        *gate
	since    time.Time
	calls    int
	reported bool
	timer    *time.Timer
}

// joined counts a call of c that began waiting at g. l.mu is held.
func (l *limiter) joined(g *gate, c who, now time.Time) {
	k := waitKey{g.key, c}
	ws := l.waits[k]
	if ws == nil {
		ws = &waiting{g: g, since: now}
		l.waits[k] = ws
		if now.Before(g.until) {
			l.report(k, ws, now)
		} else {
			ws.timer = time.AfterFunc(waitReportedAfter, func() {
				l.mu.Lock()
				if l.waits[k] == ws && !ws.reported {
					l.report(k, ws, l.now())
				}
				l.mu.Unlock()
				l.flush()
			})
		}
	}
	ws.calls++
}

// left counts a call of c that no longer waits at g (let through or
// given up). l.mu is held.
func (l *limiter) left(g *gate, c who) {
	k := waitKey{g.key, c}
	ws := l.waits[k]
	if ws == nil {
		return
	}
	if ws.calls--; ws.calls > 0 {
		return
	}
	delete(l.waits, k)
	if ws.timer != nil {
		ws.timer.Stop()
	}
	if ws.reported && l.onWait != nil {
		l.notes = append(l.notes, WaitNote{Wait: l.wait(k, ws, l.now()), Ended: l.now()})
	}
}

func (l *limiter) report(k waitKey, ws *waiting, now time.Time) {
	ws.reported = true
	if l.onWait != nil {
		l.notes = append(l.notes, WaitNote{Wait: l.wait(k, ws, now)})
	}
}

// wait describes ws as it is at now. l.mu is held.
func (l *limiter) wait(k waitKey, ws *waiting, now time.Time) Wait {
	w := Wait{Swarm: k.Swarm, Container: k.Container, Provider: k.gate.provider, Since: ws.since, Calls: ws.calls}
	g := ws.g
	switch {
	case now.Before(g.until):
		w.Reason, w.Until = WaitLimit, g.until
	case g.rpm > 0 && l.recent(g.key.provider, now) >= g.rpm:
		w.Reason, w.Bound = WaitPerMinute, g.rpm
	default:
		// Over max_concurrent, or behind the calls queued before it.
		w.Reason, w.Bound = WaitConcurrency, g.max
	}
	return w
}

// flush tells onWait the notes so far, in order, outside l.mu.
func (l *limiter) flush() {
	l.emitMu.Lock()
	defer l.emitMu.Unlock()
	l.mu.Lock()
	notes := l.notes
	l.notes = nil
	l.mu.Unlock()
	for _, n := range notes {
		l.onWait(n)
	}
}

// waitsNow lists the containers whose calls wait now, by swarm, container
// and provider.
func (l *limiter) waitsNow() []Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	out := make([]Wait, 0, len(l.waits))
	for k, ws := range l.waits {
		out = append(out, l.wait(k, ws, now))
	}
	slices.SortFunc(out, func(a, b Wait) int {
		return cmp.Or(cmp.Compare(a.Swarm, b.Swarm), cmp.Compare(a.Container, b.Container), cmp.Compare(a.Provider, b.Provider))
	})
	return out
}

// Waits lists the containers whose calls wait at the gateway now: for the
// daemon's view of its swarms (status, the board). The state file has no
// place for them.
func (s *Service) Waits() []Wait { return s.limiter.waitsNow() }
