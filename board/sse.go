package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/ctxutil"
)

// keepAlive is the comment line an idle stream sends, so that a page gone
// away is noticed and proxies keep the connection.
const keepAlive = 15 * time.Second

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, true
}

// send writes one event; id, when set, lets a reconnecting EventSource say
// where it was (Last-Event-ID). JSON has no raw newline, so data is one line.
func (s *sse) send(event, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *sse) comment() error {
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// maxBatch bounds the changes sent in one message.
const maxBatch = 256

// structural events change what the page lists (swarms, containers, exit
// codes, links), not only a status: after them the stream re-sends the list.
func structural(k api.EventKind) bool {
	switch k {
	case api.EventProgress, api.EventLineRejected:
		return false
	}
	return true
}

// events streams the state: a "list" event first, then every change in a
// "changes" event (an array: what was queued together) the page applies at
// once, and a fresh "list" shortly
// after a structural change (and at most every Heal after other changes,
// to make good what a lagging page lost). Between changes it costs the
// daemon nothing but the subscription.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxutil.WithDone(r.Context(), s.done) // ends with the request or the server
	defer cancel()
	// Subscribe before the first list: no change falls between them.
	evs, subErr := s.subscribe(ctx)
	l, err := s.list(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	out, ok := newSSE(w)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	if out.send("list", "", boardList(l)) != nil {
		return
	}
	var relist <-chan time.Time
	listed := time.Now() // when the last list went out
	heal := time.NewTicker(s.opts.Heal)
	defer heal.Stop()
	idle := time.NewTicker(keepAlive)
	defer idle.Stop()
	changed := false
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-evs:
			if !ok {
				if ctx.Err() == nil {
					_ = out.send("gone", "", errorAnswer{Error: goneMessage(<-subErr)})
				}
				return
			}
			batch, needList := drainBatch(e, evs)
			if out.send("changes", "", batch) != nil {
				return
			}
			changed = true
			if needList && relist == nil {
				relist = time.After(relistWait(time.Since(listed)))
			}
		case <-relist:
			relist = nil
			if !s.sendList(ctx, out) {
				return
			}
			changed, listed = false, time.Now()
		case <-heal.C:
			if changed && relist == nil {
				if !s.sendList(ctx, out) {
					return
				}
				changed, listed = false, time.Now()
			}
		case <-idle.C:
			if out.comment() != nil {
				return
			}
		}
	}
}

const (
	// relistSoon is the wait before the list after a structural change: a
	// burst of them costs one list.
	relistSoon = 150 * time.Millisecond
	// relistGap is the least time between two lists sent for structural
	// changes. A list is every swarm and container, and the page redraws
	// from it: while a whole swarm stops (a structural change every few
	// milliseconds for many seconds) one list per relistSoon kept the
	// daemon, the board and the page busy with lists and made the changes
	// themselves wait. The changes carry each container's status, so the
	// page shows them at once; the list follows within relistGap.
	relistGap = time.Second
)

// relistWait is how long to wait before the list after a structural change,
// since the last list went out.
func relistWait(since time.Duration) time.Duration {
	return max(relistSoon, relistGap-since)
}

// subscribe follows the daemon's events for the board's repository until
// ctx ends; the error channel gets why the stream ended once evs closes.
func (s *Server) subscribe(ctx context.Context) (<-chan api.Event, <-chan error) {
	evs := make(chan api.Event, 256)
	subErr := make(chan error, 1)
	go func() {
		defer close(evs)
		subErr <- s.opts.Daemon.Events(ctx, s.opts.Repo, func(e api.Event) error {
			select {
			case evs <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return evs, subErr
}

// goneMessage is what the page is told when the daemon ended the stream.
func goneMessage(err error) string {
	if err != nil && !errors.Is(err, context.Canceled) {
		return clean(err.Error(), maxText)
	}
	return "the daemon ended the event stream"
}

// drainBatch is e and what else is queued, up to maxBatch, for one
// message: one write and one flush for a burst, no wait for a quiet
// moment. needList says whether any of them changes the list's shape.
func drainBatch(e api.Event, evs <-chan api.Event) (batch []eventJSON, needList bool) {
	batch = []eventJSON{boardEvent(e)}
	needList = structural(e.Kind)
	for len(batch) < maxBatch {
		select {
		case more, ok := <-evs:
			if !ok {
				return batch, needList
			}
			batch = append(batch, boardEvent(more))
			needList = needList || structural(more.Kind)
		default:
			return batch, needList
		}
	}
	return batch, needList
}

func (s *Server) sendList(ctx context.Context, out *sse) bool {
	l, err := s.list(ctx)
	if err != nil {
		if ctx.Err() == nil {
			_ = out.send("gone", "", errorAnswer{Error: clean(err.Error(), maxText)})
		}
		return false
	}
	return out.send("list", "", boardList(l)) == nil
}
