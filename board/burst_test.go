package board

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/browsertest"
	"github.com/aimi-tools/swarm/state"
)

// manyContainers is one swarm of n running containers.
func manyContainers(n int) api.SwarmList {
	v := api.SwarmView{RepoPath: "/r", State: &state.Swarm{SwarmID: "s1"}}
	for i := range n {
		name := fmt.Sprintf("aimi-%03d", i)
		v.State.Containers = append(v.State.Containers, &state.Container{ContainerName: name, Status: state.StatusRunning})
		v.Containers = append(v.Containers, api.ContainerDetail{Name: name, Status: "running"})
	}
	return api.SwarmList{Swarms: []api.SwarmView{v}}
}

// TestABurstOfExitsCostsFewLists: while a whole swarm stops, a structural
// change arrives every few milliseconds for seconds. Each change goes out at
// once, but the list (every container, redrawn by the page) goes out at
// most about once a second, not once per relistSoon: the lists used to
// keep the daemon, the board and the page busy while the changes waited.
func TestABurstOfExitsCostsFewLists(t *testing.T) {
	const n = 200
	f := &fakeDaemon{events: make(chan api.Event, n), list: manyContainers(n)}
	base, _ := serveBoard(t, f)
	c := session(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan []sseEvent, 1)
	go func() {
		got <- readEventsWhile(t, ctx, c, base+"/api/events", func(evs []sseEvent) bool {
			return len(evs) == 0 || !strings.Contains(evs[len(evs)-1].data, `"aimi-199"`) || evs[len(evs)-1].name != "changes"
		})
	}()
	// 200 exits, one every 10 ms: two seconds of burst.
	burst := 10 * time.Millisecond
	t0 := time.Now()
	for i := range n {
		f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/r", ContainerName: fmt.Sprintf("aimi-%03d", i), Kind: api.EventContainerExited, Status: "stopped"}
		time.Sleep(burst)
	}
	evs := <-got
	took := time.Since(t0)
	lists, changes := 0, 0
	for _, e := range evs {
		switch e.name {
		case "list":
			lists++
		case "changes":
			changes += strings.Count(e.data, `"kind":"container-exited"`)
		}
	}
	if changes != n {
		t.Fatalf("%d exits reached the stream, want %d (%d events, last %.200v)", changes, n, len(evs), evs[len(evs)-1])
	}
	// The first list, then at most one per relistGap of the burst (and one
	// for its end).
	if most := 2 + int(took/relistGap); lists > most {
		t.Errorf("%d lists for a burst of %d exits over %v, want at most %d", lists, n, took.Round(time.Millisecond), most)
	}
}

// TestAListRedrawsOnlyTheCardsItChanged: with 200 cards on the page, the
// list that follows a few exits redraws those cards, not all 200 (a list
// per second during a stop of hundreds used to redraw every card each
// time, and the page's changes waited behind it).
func TestAListRedrawsOnlyTheCardsItChanged(t *testing.T) {
	const n, exits = 200, 10
	f := &fakeDaemon{events: make(chan api.Event, n), list: manyContainers(n)}
	base, _ := serveBoard(t, f)
	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // minutes: a loaded machine
	defer cancelT()
	all := fmt.Sprintf(`document.querySelectorAll('[data-container][data-status="running"]').length === %d`, n)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#token="+testToken)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](all, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("the page never showed %d running cards: %v", n, err)
	}
	before, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`({renders: window.aimiBoard.renders, lists: window.aimiBoard.lists})`))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	for i := range exits {
		f.list.Swarms[0].State.Containers[i].Status = state.StatusStopped
		f.list.Swarms[0].Containers[i].Status = "stopped"
	}
	f.mu.Unlock()
	for i := range exits {
		f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/r", ContainerName: fmt.Sprintf("aimi-%03d", i), Kind: api.EventContainerExited, Status: "stopped"}
	}
	relisted := fmt.Sprintf(`window.aimiBoard.lists > %v && document.querySelectorAll('[data-container][data-status="stopped"]').length === %d`, before["lists"], exits)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](relisted, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("no list after the exits, or not %d stopped cards: %v", exits, err)
	}
	after, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.aimiBoard.renders`))
	if err != nil {
		t.Fatal(err)
	}
	// Each exited card drawn for its change and once more for the list
	// (which carries what the change did not); the others not at all.
	if drawn := after - before["renders"]; drawn > 2*exits {
		t.Errorf("%v card draws for %d exits and a list, want at most %d", drawn, exits, 2*exits)
	}
}
