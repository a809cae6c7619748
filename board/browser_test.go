package board

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
	"github.com/aimi-tools/swarm/internal/browsertest"
	"github.com/aimi-tools/swarm/state"
)

// hostile is a story title and an output line a task file or container
// could carry: as text on the page, never as markup.
const hostile = `<img src=x onerror="document.title='owned'">`

func fakeSwarm() api.SwarmList {
	now := time.Now().UTC()
	c := &state.Container{ContainerName: "aimi-web", TaskFilePath: ".aimi/tasks/web-tasks.json", BranchName: "feat/web", Status: state.StatusRunning,
		StoryProgress: state.Progress{Total: 3, Completed: 1, InProgress: 1, Pending: 1}, CreatedAt: now.Add(-90 * time.Second), UpdatedAt: now}
	return api.SwarmList{Swarms: []api.SwarmView{{
		RepoPath: "/home/dev/web",
		State:    &state.Swarm{SwarmID: "6f1c2d3e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", CreatedAt: now, UpdatedAt: now, Containers: []*state.Container{c}},
		Containers: []api.ContainerDetail{{Name: "aimi-web", TaskFile: c.TaskFilePath, Branch: c.BranchName, Status: "running", LastOutput: hostile,
			Stories: []api.StoryDetail{
				{ID: "US-001", Title: "Schema", DependsOn: []string{}, Status: "completed"},
				{ID: "US-002", Title: hostile, DependsOn: []string{"US-001"}, Status: "in_progress"},
				{ID: "US-003", Title: "Docs", DependsOn: []string{"US-001"}, Status: "pending"},
			}}},
		Land: &api.LandReport{Branch: "aimi/land/6f1c2d3e", Onto: "main", Running: true, Cost: 0.05, Results: []api.LandResult{
			{Container: "aimi-api", Outcome: "landed", Cost: 0.125},
			{Container: "aimi-web", Outcome: api.LandFixing, Fixup: "aimi-land-fix-aimi-web", Cost: 0.5, RunsCost: 0.05},
			{Container: "aimi-cli", Outcome: "held", Reason: "it conflicts on " + hostile},
		}},
	}}}
}

// TestPageRendersLiveAndShowsHostileTextAsText drives the real page in
// Chromium against a scripted daemon: the card, the story graph and the
// progress come from the list; a change event moves a story without a
// reload; hostile text stays text.
func TestPageRendersLiveAndShowsHostileTextAsText(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event, 8), list: fakeSwarm()}
	base, _ := serveBoard(t, f)
	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // minutes: a loaded machine
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(`[data-container="aimi-web"] g.story[data-story="US-002"][data-status="in_progress"]`))); err != nil {
		t.Fatal(err)
	}
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.aimiBoard.loadedAt`))
	if err != nil {
		t.Fatal(err)
	}
	f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventProgress, Status: "running", MessageType: "progress-update", StoryID: "US-002", StoryStatus: "completed", Output: "US-002 done"}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-container="aimi-web"] g.story[data-story="US-002"][data-status="completed"]`))); err != nil {
		t.Fatal(err)
	}
	card := `[data-container="aimi-web"]`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const card = document.querySelector('[data-container="aimi-web"]');
		return {
			loadedAt: window.aimiBoard.loadedAt,
			title: document.title,
			imgs: document.querySelectorAll('img').length,
			output: card.querySelector('.output').textContent,
			bar: card.querySelector('.bar-label').textContent,
			progress: card.querySelector('progress').value,
			node: card.querySelectorAll('dd')[3].textContent,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got["loadedAt"].(float64) != loaded {
		t.Errorf("the page reloaded (loadedAt %v, then %v)", loaded, got["loadedAt"])
	}
	if got["title"] != "aimi swarm board" || got["imgs"].(float64) != 0 {
		t.Errorf("hostile text became markup: title %q, %v img elements", got["title"], got["imgs"])
	}
	if got["output"] != "US-002 done" || !strings.HasPrefix(got["bar"].(string), "2/3 completed") || got["progress"].(float64) != 2 {
		t.Errorf("card after the change: %+v", got)
	}

	checkLimitWaitOnTheCard(t, ctx, f, card)
	checkConflictBadge(t, ctx, f, card)
	checkLandPanel(t, ctx)
	checkJournalOnThePage(t, ctx, f, card)
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("AIMI_TEST_ARTIFACTS"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, "board-fake.png"), png, 0o644)
	}
}

// checkLimitWaitOnTheCard sends a limit wait and its end and checks the
// card shows the wait while it lasts.
func checkLimitWaitOnTheCard(t *testing.T, ctx context.Context, f *fakeDaemon, card string) {
	t.Helper()
	// A limit wait shows on the card while it lasts.
	wait := "waiting for anthropic limit until 03:12:40"
	f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventLimitWait, Output: wait}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(card+` .limit-wait`))); err != nil {
		t.Fatalf("no limit wait on the card: %v", err)
	}
	if shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-container="aimi-web"] .limit-wait').textContent`)); err != nil || shown != wait {
		t.Fatalf("limit wait on the card: %q %v", shown, err)
	}
	f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventLimitWaitOver, Output: "over"}
	if err := chromedp.Do(ctx, chromedp.WaitNotVisible(chromedp.CSS(card+` .limit-wait`))); err != nil {
		t.Fatalf("the limit wait stays on the card after its end: %v", err)
	}
}

// checkConflictBadge sends a conflict of the card's container with the
// landing target and its end, and checks the badge shows while it lasts.
func checkConflictBadge(t *testing.T, ctx context.Context, f *fakeDaemon, card string) {
	t.Helper()
	k := &api.Conflict{Containers: []string{"aimi-web"}, Onto: "main", Files: []string{"<img src=x>.go"}, Kind: "conflict"}
	f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventConflictDetected, Conflict: k}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(card+` .conflict-badge`))); err != nil {
		t.Fatalf("no conflict badge on the card: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const b = document.querySelector('[data-container="aimi-web"] .conflict-badge');
		return {text: b.textContent, title: b.title, imgs: document.querySelectorAll('img').length};
	})()`))
	if err != nil || got["text"] != "conflicts with main (the landing target)" || !strings.Contains(got["title"].(string), "<img src=x>.go") || got["imgs"].(float64) != 0 {
		t.Fatalf("conflict badge: %+v %v", got, err)
	}
	f.events <- api.Event{Time: time.Now().UTC(), RepoPath: "/home/dev/web", ContainerName: "aimi-web", Kind: api.EventConflictCleared, Conflict: k}
	if err := chromedp.Do(ctx, chromedp.WaitNotVisible(chromedp.CSS(card+` .conflict-badge`))); err != nil {
		t.Fatalf("the conflict badge stays after the conflict cleared: %v", err)
	}
}

// checkLandPanel: the swarm's land shows where it lands and each branch's
// outcome, the fix-up that runs, and a reason as text.
func checkLandPanel(t *testing.T, ctx context.Context) {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const l = document.querySelector('.land');
		return {hidden: l.hidden, head: l.querySelector('h3').textContent, cost: l.querySelector('.land-cost').textContent,
			items: [...l.querySelectorAll('li')].map((li) => li.dataset.outcome + '|' + li.textContent),
			imgs: document.querySelectorAll('img').length};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	items, _ := got["items"].([]any)
	if got["hidden"] != false || got["head"] != "Land onto main as aimi/land/6f1c2d3e (running)" || len(items) != 3 || got["imgs"].(float64) != 0 {
		t.Fatalf("land panel: %+v", got)
	}
	if items[0] != "landed|landed aimi-api · cost 0.1250" || items[1] != "fixing|fixing aimi-web (in aimi-land-fix-aimi-web) · cost 0.5000 + 0.0500 land" ||
		!strings.HasPrefix(items[2].(string), "held|held aimi-cli · cost 0.0000: it conflicts on <img") {
		t.Errorf("land panel items: %q", items)
	}
	if got["cost"] != "Land cost (checks and fix-ups): 0.0500" {
		t.Errorf("land panel cost: %q", got["cost"])
	}
}

// checkJournalOnThePage opens the card's journal and checks stderr lines
// and error codes are marked and hostile text shows as text.
func checkJournalOnThePage(t *testing.T, ctx context.Context, f *fakeDaemon, card string) {
	t.Helper()
	// The journal: stderr and error codes marked, hostile text as text.
	f.records = []state.Record{
		{Seq: 1, Stream: state.StreamStdout, Valid: true, Type: "progress-update", Message: []byte(`{"type":"progress-update","payload":{"storyId":"US-002","status":"in_progress","output":"working"}}`)},
		{Seq: 2, Stream: state.StreamStderr, Raw: hostile, Reason: "stderr: log output"},
		{Seq: 3, Stream: state.StreamStdout, Valid: true, Type: "error", Message: []byte(`{"type":"error","payload":{"code":"GIT_PUSH_FAILED","message":"push refused"}}`)},
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(card+` button[data-action="journal"]`)), chromedp.WaitVisible(chromedp.CSS(card+` .journal li.end`))); err != nil {
		t.Fatal(err)
	}
	j, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const j = document.querySelector('[data-container="aimi-web"] .journal');
		return {
			lines: j.querySelectorAll('li.line').length,
			stderr: j.querySelector('li[data-stream="stderr"] .text').textContent,
			stderrTag: j.querySelector('li[data-stream="stderr"] .stream').textContent,
			code: j.querySelector('li.line .code').textContent,
			imgs: document.querySelectorAll('img').length,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if j["lines"].(float64) != 3 || j["stderr"] != hostile || j["stderrTag"] != "stderr" || j["code"] != "GIT_PUSH_FAILED" || j["imgs"].(float64) != 0 {
		t.Errorf("journal on the page = %+v, want 3 lines, the stderr line marked and as text, the error code marked", j)
	}
}

// TestKeyboardAndNarrowWindow: in a phone-wide window nothing is wider than
// the screen, and the Stop button is reached with Tab and run with Enter.
func TestKeyboardAndNarrowWindow(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event), list: fakeSwarm()}
	base, _ := serveBoard(t, f)
	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // minutes: a loaded machine
	defer cancelT()
	card := `[data-container="aimi-web"]`
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 740), chromedp.Navigate(base+"/#token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(card+` g.story`))); err != nil {
		html, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("%v; page: %s", err, html)
	}
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth - window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow > 0 {
		t.Errorf("at 360 px the page is %v px wider than the window", overflow)
	}
	// Tab from the top until the container's Stop button has the focus.
	found := false
	for i := 0; i < 20 && !found; i++ {
		if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		on, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement.matches('`+card+` button[data-action="stop"]')`))
		if err != nil {
			t.Fatal(err)
		}
		found = on
	}
	if !found {
		t.Fatal("Tab never reached the container's Stop button")
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(card+` .result[data-state="ok"]`))); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.stopped, ",") != "aimi-web" {
		t.Errorf("Enter on Stop stopped %v, want [aimi-web]", f.stopped)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil && os.Getenv("AIMI_TEST_ARTIFACTS") != "" {
		_ = os.WriteFile(filepath.Join(os.Getenv("AIMI_TEST_ARTIFACTS"), "board-narrow.png"), png, 0o644)
	}
}

// TestPageWaitsForTheDaemonAndShowsTheCleanupRefusal: a page opened while
// the daemon is down says so and fills in by itself once it answers; Clean
// up that keeps a container holding unreceived commits says which, why and
// which commits, as the CLI does.
func TestPageWaitsForTheDaemonAndShowsTheCleanupRefusal(t *testing.T) {
	f := &fakeDaemon{events: make(chan api.Event), list: fakeSwarm(),
		listErr: &daemon.UnreachableError{Socket: "/run/aimi/aimid.sock", Err: errors.New("connection refused")},
		cleanup: api.CleanupReport{RepoPath: "/home/dev/web", Removed: []string{}, Kept: []api.Kept{{Name: "aimi-web", Reason: "its branch holds 1 commit nobody received", Commits: []string{"3f2a9c1"}}}}}
	base, _ := serveBoard(t, f)
	actx, _ := browsertest.Start(t)
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // minutes: a loaded machine
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#token="+testToken), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="reconnecting"]`))); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.listErr = nil
	f.mu.Unlock()
	card := `[data-container="aimi-web"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(card)), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`)),
		chromedp.Click(chromedp.CSS(`button[data-action="cleanup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.swarm > .result[data-state="error"]`))); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.swarm > .result`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"removed: none", "kept aimi-web: its branch holds 1 commit nobody received (unreceived commits 3f2a9c1)", "cleanup --force"} {
		if !strings.Contains(got, want) {
			t.Errorf("cleanup result %q lacks %q", got, want)
		}
	}
	if f.force == nil || *f.force {
		t.Errorf("the page's cleanup reached the daemon with force=%v, want false", f.force)
	}
}
