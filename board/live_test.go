package board

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/browsertest"
)

// TestThePageStaysLiveThroughAPermissionRequest: the daemon's
// permission-requested event names the story it came from but carries no
// story status. The page must not take that for a story status: the story
// keeps its status, the header stays "live" and the page keeps the one
// stream it opened (it used to throw on the event, drop the stream and
// show "reconnecting…" with the daemon up).
func TestThePageStaysLiveThroughAPermissionRequest(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event, 8), list: fakeSwarm()}
	base, _ := serveBoard(t, f)
	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // minutes: a loaded machine
	defer cancelT()
	card := `[data-container="aimi-web"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(card+` g.story[data-story="US-002"][data-status="in_progress"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	f.events <- api.Event{Time: now, RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventPermissionRequested,
		StoryID: "US-002", RequestID: "req-1", Output: "Write step-1.txt"}
	f.events <- api.Event{Time: now, RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventProgress, Status: "running",
		MessageType: "progress-update", Output: "after the request"}
	var got map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		got, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
			const card = document.querySelector('[data-container="aimi-web"]');
			return {
				conn: document.getElementById('conn').dataset.state,
				output: card.querySelector('.output').textContent,
				story: card.querySelector('g.story[data-story="US-002"]').getAttribute('data-status'),
			};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if got["conn"] != "live" {
			t.Fatalf("with the daemon up the page's stream ended: %+v", got)
		}
		if got["output"] == "after the request" || time.Now().After(deadline) {
			break
		}
		if err := chromedp.Do(ctx, chromedp.Sleep(50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if got["output"] != "after the request" || got["story"] != "in_progress" {
		t.Errorf("after a permission request and a change: %+v, want the change shown and US-002 still in_progress", got)
	}
	if n := strings.Count(strings.Join(f.Calls(), ","), "events"); n != 1 {
		t.Errorf("the page subscribed %d times, want once", n)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.aimiBoard.streams`)); err != nil || n != 1 {
		t.Errorf("the page opened %v events streams (%v), want 1", n, err)
	}
}
