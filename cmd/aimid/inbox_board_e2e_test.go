package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/browsertest"
	"github.com/aimi-tools/swarm/state"
)

// TestBoardAnswersRequestsInABrowser: the real daemon (policy ask, local
// git mode, sandbox image, demo agent asking before its write and its
// terminal command), `aimi swarm ui` and headless Chromium. The page shows
// the write request with the count in its title and the agent's options as
// buttons; Tab reaches the allow button and Enter answers it; the next
// request (the command) comes in by itself and a click on its reject
// button answers it; the inbox empties, the title loses its count and the
// container completes, its journal naming both answers as a person's.
func TestBoardAnswersRequestsInABrowser(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox and browser images and runs a real container")
	}
	image := sandboxImage(t)
	actx, _ := browsertest.Start(t)
	repo, _ := inboxRepo(t, "askboard", "[demo:ask-exec]")
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_PERMISSION_POLICY=ask", "AIMI_AGENT_ASK_TIMEOUT=10m"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	boardCtx, stopBoard := context.WithCancel(ctx)
	defer stopBoard()
	u, _ := startBoard(t, boardCtx, sock)
	page, cancelPage := chromedp.NewContext(actx)
	defer cancelPage()
	page, cancelT := context.WithTimeout(page, 7*time.Minute)
	defer cancelT()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			html, _ := chromedp.Run(context.WithoutCancel(page), chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage: %s", what, err, html)
		}
	}
	must("open the board", chromedp.Do(page, chromedp.EmulateViewport(1100, 900), chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))))
	baseTitle, err := chromedp.Run(page, chromedp.Evaluate[string](`document.title`))
	must("read the title", err)

	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	w := waitInbox(t, run, 3*time.Minute, "the agent's write request", func(r []api.PermissionRequest) bool { return len(r) == 1 })[0]
	req := `#inbox li.request[data-request="` + w.ID + `"]`
	must("the write request on the page", chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(req+` button[data-kind="allow_once"]`))))
	checkInboxPage(t, page, baseTitle, req, "edit")
	saveScreenshot(t, page, "inbox-request.png")
	checkStillLive(t, page)

	// Tab from the top until the request's allow button has the focus.
	allow := req + ` button[data-kind="allow_once"]`
	tabTo(t, page, allow, must)
	must("Enter answers", chromedp.Do(page, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`#inbox-result[data-state="ok"]`))))

	x := waitInbox(t, run, 3*time.Minute, "the terminal command's request", func(r []api.PermissionRequest) bool {
		return len(r) == 1 && r[0].Kind == "execute"
	})[0]
	req = `#inbox li.request[data-request="` + x.ID + `"]`
	must("the command's request on the page", chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(req+` button[data-kind="reject_once"]`))))
	checkInboxPage(t, page, baseTitle, req, "execute")
	must("click reject", chromedp.Do(page, chromedp.Click(chromedp.CSS(req+` button[data-kind="reject_once"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(req))))

	view := waitFor(t, sock, repo, 3*time.Minute, "the container exited", allExited)
	d := view.Containers[0]
	if d.Status != string(state.StatusCompleted) {
		t.Errorf("container %s: %s %+v", d.Name, d.Status, d.Errors)
	}
	title := waitTitle(t, page, baseTitle, must)
	if title != baseTitle {
		t.Errorf("the title with the inbox empty: %q, want %q", title, baseTitle)
	}
	saveScreenshot(t, page, "inbox-answered.png")
	checkStillLive(t, page)
	code, logs, _ := run("swarm", "logs", d.Name)
	for _, want := range []string{"permission request " + w.ID + " (", "permission request " + x.ID + " (", `a person chose "allow"`, `a person chose "skip"`} {
		if code != 0 || !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// tabTo presses Tab from the top of the page, at most 40 times, until the
// element sel has the focus; must fails the test with the page.
func tabTo(t *testing.T, page context.Context, sel string, must func(what string, err error)) {
	t.Helper()
	found := false
	for i := 0; i < 40 && !found; i++ {
		must("press Tab", chromedp.Do(page, chromedp.KeyEvent("\t")))
		on, err := chromedp.Run(page, chromedp.Evaluate[bool](`document.activeElement.matches('`+sel+`')`))
		must("read the focus", err)
		found = on
	}
	if !found {
		t.Fatal("Tab never reached the request's allow button")
	}
}

// waitTitle waits up to a minute for the page's title to be baseTitle
// again; it returns the last title read.
func waitTitle(t *testing.T, page context.Context, baseTitle string, must func(what string, err error)) string {
	t.Helper()
	var title string
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		title, err = chromedp.Run(page, chromedp.Evaluate[string](`document.title`))
		must("read the title", err)
		if title == baseTitle || time.Now().After(deadline) {
			break
		}
	}
	return title
}

// checkInboxPage: the title counts one request, and the request's line
// names its kind.
func checkInboxPage(t *testing.T, page context.Context, baseTitle, req, kind string) {
	t.Helper()
	title, err := chromedp.Run(page, chromedp.Evaluate[string](`document.title`))
	if err != nil || title != "(1) "+baseTitle {
		t.Errorf("title %q (%v), want %q", title, err, "(1) "+baseTitle)
	}
	what, err := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('`+req+` .what').textContent`))
	if err != nil || !strings.Contains(what, kind+": ") {
		t.Errorf("the request's line %q (%v) does not name kind %s", what, err, kind)
	}
}

// checkStillLive: with the daemon up all along, the page still follows the
// one events stream it opened, and its header says "live".
func checkStillLive(t *testing.T, page context.Context) {
	t.Helper()
	got, err := chromedp.Run(page, chromedp.Evaluate[map[string]any](`({conn: document.getElementById('conn').dataset.state, streams: window.aimiBoard.streams})`))
	if err != nil || got["conn"] != "live" || got["streams"] != float64(1) {
		t.Errorf("the board's connection with the daemon up: %+v (%v), want live on its first stream", got, err)
	}
}
