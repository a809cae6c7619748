package inbox

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// TestAContainerThatEndedDropsItsRequests: Run drops a container's pending
// requests on its exit event (its waiting runner gets 410, an answer is
// refused, the event says container-ended), and on its next tick those of
// a container that no longer runs (an exit event lost, or one that ended
// while the daemon was down and sends again); such a container's requests
// are not taken.
func TestAContainerThatEndedDropsItsRequests(t *testing.T) {
	var mu sync.Mutex
	running := map[string]bool{"c1": true, "c2": true}
	var events []api.Event
	in := New(Config{
		Running: func(sb contract.Sandbox) bool { mu.Lock(); defer mu.Unlock(); return running[sb.Container] },
		Publish: func(e api.Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exits := make(chan api.Event, 1)
	go in.Run(ctx, exits)
	codes := make(chan int, 2)
	for _, c := range []string{"c1", "c2"} {
		go func() {
			code, _ := send(t, in, c, "00112233aabbcc"+map[string]string{"c1": "01", "c2": "02"}[c], ctx)
			codes <- code
		}()
	}
	reqs := waitPending(t, in, 2)
	exits <- api.Event{Kind: api.EventContainerExited, SwarmID: "sw", ContainerName: "c1"}
	if code := <-codes; code != http.StatusGone {
		t.Errorf("c1's waiting runner: HTTP %d, want 410", code)
	}
	mu.Lock()
	running["c2"] = false // ended without an event this inbox heard
	mu.Unlock()
	if code := <-codes; code != http.StatusGone {
		t.Errorf("c2's waiting runner: HTTP %d, want 410", code)
	}
	waitPending(t, in, 0)
	for _, r := range reqs {
		if _, err := in.Answer(ctx, api.AnswerRequest{ID: r.ID, Option: "allow"}); err == nil {
			t.Errorf("an answer to %s of ended container %s was taken", r.ID, r.ContainerName)
		}
	}
	if code, a := send(t, in, "c2", "00112233aabbcc03", ctx); code != http.StatusGone || a.State == contract.AskPending {
		t.Errorf("a new request of an ended container: HTTP %d %+v, want 410", code, a)
	}
	// Drop wakes the waiting runner before it publishes (outside its
	// lock): the events follow the 410s, so wait for them with a deadline.
	endedEvents := func() int {
		mu.Lock()
		defer mu.Unlock()
		ended := 0
		for _, e := range events {
			if e.Kind == api.EventPermissionAnswered && e.AnsweredBy == "container-ended" {
				ended++
			}
		}
		return ended
	}
	testwait.Eventually(t, 10*time.Second, "2 permission-answered events by container-ended", func() error {
		if n := endedEvents(); n < 2 {
			return fmt.Errorf("%d of them", n)
		}
		return nil
	}, testwait.Every(5*time.Millisecond))
	if n := endedEvents(); n != 2 {
		mu.Lock()
		defer mu.Unlock()
		t.Errorf("%d permission-answered events by container-ended, want 2: %+v", n, events)
	}
}
