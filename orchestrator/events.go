package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/api"
)

// subscriberBuffer is each subscriber's queue. Publishing never blocks a
// supervisor: a subscriber that falls this far behind loses events (it can
// always re-read Status); a stalled HTTP client must not stall the swarm.
const subscriberBuffer = 1024

// bus fans events out to subscribers.
type bus struct {
	mu   sync.Mutex
	subs map[chan api.Event]struct{}
}

func newBus() *bus { return &bus{subs: map[chan api.Event]struct{}{}} }

func (b *bus) subscribe(ctx context.Context) <-chan api.Event {
	ch := make(chan api.Event, subscriberBuffer)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
		b.mu.Unlock()
	}()
	return ch
}

func (b *bus) publish(e api.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- e:
		default: // slow subscriber: drop rather than block the swarm
		}
	}
}

// closeAll ends every subscription (Shutdown).
func (b *bus) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}
