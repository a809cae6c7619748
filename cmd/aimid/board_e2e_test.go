package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/internal/browsertest"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// slowTasks is one story the demo agent takes its time over ([demo:slow]:
// up to a minute, or until it is cancelled): a container to stop.
const slowTasks = `{
  "schemaVersion": "3.0",
  "metadata": {"title": "feat: slow", "type": "feat", "branchName": "feat/slow", "createdAt": "2026-11-20", "planPath": null, "maxConcurrency": 1},
  "userStories": [
    {"id": "US-001", "title": "Slow story", "description": "As a developer, I want a story that takes a while.", "acceptanceCriteria": ["File step-1.txt exists"], "priority": 1, "status": "pending", "dependsOn": [], "notes": "[demo:slow]"}
  ]
}
`

// ArtifactsEnv names the directory where browser tests leave their
// screenshots; default test-artifacts/ at the repository's root.
const ArtifactsEnv = "AIMI_TEST_ARTIFACTS"

func artifactsDir(t testing.TB) string {
	dir := os.Getenv(ArtifactsEnv)
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	dir = filepath.Join(dir, "board")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var boardURLRe = regexp.MustCompile(`board: (http://127\.0\.0\.1:\d+)/#token=\S+`)

// startBoard runs `aimi swarm ui` in-process against sock and returns its
// printed URL (with the token) and its origin (without).
func startBoard(t testing.TB, ctx context.Context, sock string) (string, string) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := cli.Run(ctx, []string{"swarm", "ui", "--socket", sock, "--no-open"}, cli.Streams{In: strings.NewReader(""), Out: pw, Err: os.Stderr})
		pw.Close()
		done <- code
	}()
	t.Cleanup(func() {
		if code := <-done; code != 0 {
			t.Errorf("aimi swarm ui exited %d", code)
		}
	})
	br := bufio.NewReader(pr)
	go func() {
		<-ctx.Done()
		pr.Close()
	}()
	for {
		line, err := br.ReadString('\n')
		if m := boardURLRe.FindStringSubmatch(line); m != nil {
			go func() { _, _ = io.Copy(io.Discard, br) }()
			return strings.TrimSpace(m[0][len("board: "):]), m[1]
		}
		if err != nil {
			t.Fatalf("aimi swarm ui printed no URL: %v", err)
		}
	}
}

func saveScreenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Errorf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s", p)
}

// TestBoardInABrowserFollowsARealSwarm: the real daemon (local git mode,
// sandbox image, demo agent), `aimi swarm ui`, and headless Chromium. The
// page, opened before the swarm starts, shows it appear, a story and a
// container turn completed, all without a reload; a click on Stop stops the
// slow container, on the page and in .aimi/swarm-state.json; a second
// browser context without the token gets only the refusal. Screenshots
// mid-swarm and at the end go to test-artifacts/board/.
func TestBoardInABrowserFollowsARealSwarm(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox and browser images and runs real containers")
	}
	image := sandboxImage(t)
	actx, _ := browsertest.Start(t)

	repo, linear, slow := boardE2ERepo(t)

	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	launch(t, daemonOpts{Sock: sock, DataDir: filepath.Join(dir, "data"), Image: image, Local: true})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	boardCtx, stopBoard := context.WithCancel(ctx)
	defer stopBoard()
	u, origin := startBoard(t, boardCtx, sock)

	page, cancelPage := chromedp.NewContext(actx)
	defer cancelPage()
	page, cancelT := context.WithTimeout(page, 7*time.Minute)
	defer cancelT()
	boardMust(t, "open the board", chromedp.Do(page, chromedp.EmulateViewport(1100, 900), chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))))
	loadedAt, err := chromedp.Run(page, chromedp.Evaluate[float64](`window.aimiBoard.loadedAt`))
	boardMust(t, "read the page's load time", err)

	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	linearCard := fmt.Sprintf(`[data-container="aimi-%s"]`, linear)
	slowCard := fmt.Sprintf(`[data-container="aimi-%s"]`, slow)

	// The slow story in progress: mid-swarm.
	boardMust(t, "the slow story in progress", chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(slowCard+` g.story[data-story="US-001"][data-status="in_progress"]`))))
	saveScreenshot(t, page, "board-mid-swarm.png")

	// Stop the slow one from the page while its story runs (the demo agent
	// would finish it by itself after a minute).
	stopTheSlowOneFromThePage(t, page, slowCard, slow)
	// The linear chain completes, story by story, then the container.
	boardMust(t, "the last linear story completed", chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(linearCard+` g.story[data-story="US-003"][data-status="completed"]`))))
	boardMust(t, "the linear container completed", chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(linearCard+`[data-status="completed"]`))))
	// The page shows the daemon's fold; the state file follows it within
	// the recorder's write delay.
	waitBoardStateFile(t, repo, linear, slow)

	// Resume: nothing pending is left to start; the page says what the
	// daemon answered.
	boardMust(t, "click resume", chromedp.Do(page, chromedp.Click(chromedp.CSS(`button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.swarm > .result[data-state="ok"]`))))
	if got, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`.swarm > .result`))); err != nil || got != "resume: done (1 completed, 1 stopped)" {
		t.Errorf("resume result on the page = %q (%v), want the daemon's answer", got, err)
	}

	// The linear container's journal, as it stands at the end.
	checkBoardJournalAndNoReload(t, page, linearCard, loadedAt)

	// A second browser context: no token. The page is the same for
	// everybody and says so; the data is refused.
	checkBoardRefusesWithoutTheToken(t, page, origin, repo)

	// Clean up from the page: the daemon removes both containers (their
	// work was received) and the state file, and the page says so.
	cleanUpFromThePage(t, page, repo, linear, slow)
	stopBoard()
}

// boardMust fails the test with what when err is not nil.
func boardMust(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// boardE2ERepo makes a checkout with a linear and a slow task file
// committed on main; it returns it and the two task files' names.
func boardE2ERepo(t *testing.T) (repo, linear, slow string) {
	t.Helper()
	repo = shortDir(t)
	gitOut(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, ".aimi", "tasks"), 0o755)
	sfx := fmt.Sprintf("%x", sha256.Sum256([]byte(repo)))[:6]
	linear, slow = "linear-"+sfx, "slow-"+sfx
	for name, body := range map[string]string{linear: localLinearTasks, slow: slowTasks} {
		if err := os.WriteFile(filepath.Join(repo, ".aimi", "tasks", name+"-tasks.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, repo, "add", "-A")
	gitOut(t, repo, "commit", "-q", "-m", "task files")
	removeProjectContainersAtEnd(t, repo)
	return repo, linear, slow
}

// stopTheSlowOneFromThePage stops the slow container from the page while
// its story runs (the demo agent would finish it by itself after a minute).
func stopTheSlowOneFromThePage(t *testing.T, page context.Context, slowCard, slow string) {
	t.Helper()
	boardMust(t, "click stop", chromedp.Do(page, chromedp.Click(chromedp.CSS(slowCard+` button[data-action="stop"]`))))
	boardMust(t, "the slow container stopped", chromedp.Do(page, chromedp.WaitVisible(chromedp.CSS(slowCard+`[data-status="stopped"]`)),
		chromedp.WaitVisible(chromedp.CSS(slowCard+` .result[data-state="ok"]`))))
	result, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(slowCard+` .result`)))
	boardMust(t, "read the stop result", err)
	if !strings.HasPrefix(result, "stop aimi-"+slow+": done") {
		t.Errorf("stop result on the page = %q, want it done", result)
	}
}

// waitBoardStateFile waits for the state file to follow the page: it shows
// the daemon's fold, the state file follows within the recorder's write
// delay.
func waitBoardStateFile(t *testing.T, repo, linear, slow string) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, fmt.Sprintf("swarm-state.json to say %s stopped and %s completed", slow, linear), func() error {
		got := map[string]state.ContainerStatus{}
		for _, c := range validState(t, repo).Containers {
			got[c.ContainerName] = c.Status
		}
		if got["aimi-"+slow] != state.StatusStopped || got["aimi-"+linear] != state.StatusCompleted {
			return fmt.Errorf("swarm-state.json says %v", got)
		}
		return nil
	})
}

// checkBoardJournalAndNoReload opens the linear container's journal, as it
// stands at the end, and checks the page was never reloaded.
func checkBoardJournalAndNoReload(t *testing.T, page context.Context, linearCard string, loadedAt float64) {
	t.Helper()
	boardMust(t, "open the journal", chromedp.Do(page, chromedp.Click(chromedp.CSS(linearCard+` button[data-action="journal"]`)),
		chromedp.WaitVisible(chromedp.CSS(linearCard+` .journal li.end`))))
	lines, err := chromedp.Run(page, chromedp.Evaluate[float64](fmt.Sprintf(`document.querySelectorAll('%s .journal li.line[data-kind="message"]').length`, linearCard)))
	boardMust(t, "count journal lines", err)
	if lines < 7 { // task-request, 3 x (in_progress, completed), completion
		t.Errorf("journal shows %v message lines, want at least 7", lines)
	}
	reloaded, err := chromedp.Run(page, chromedp.Evaluate[float64](`window.aimiBoard.loadedAt`))
	boardMust(t, "read the load time again", err)
	if reloaded != loadedAt {
		t.Errorf("the page was reloaded (loadedAt %v then %v): updates must arrive live", loadedAt, reloaded)
	}
	saveScreenshot(t, page, "board-end.png")
}

// checkBoardRefusesWithoutTheToken opens the board in a second browser
// context with no token: the page is the same for everybody and says so;
// the data is refused.
func checkBoardRefusesWithoutTheToken(t *testing.T, page context.Context, origin, repo string) {
	t.Helper()
	other, cancelOther := chromedp.NewContext(page, chromedp.WithNewBrowserContext())
	defer cancelOther()
	boardMust(t, "open the board without the token", chromedp.Do(other, chromedp.Navigate(origin+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="refused"]`))))
	if body, err := chromedp.Run(other, chromedp.Evaluate[string](`document.body.innerText`)); err != nil || strings.Contains(body, repo) {
		t.Errorf("the page without the token shows %q (%v), want no swarm", body, err)
	}
	boardMust(t, "ask for the swarms without the token", chromedp.Do(other, chromedp.Navigate(origin+"/api/swarms")))
	if body, err := chromedp.Run(other, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`)); err != nil || !strings.HasPrefix(body, "refused:") || strings.Contains(body, repo) {
		t.Errorf("/api/swarms without the token shows %q (%v), want only the refusal", body, err)
	}
}

// cleanUpFromThePage cleans up from the page: the daemon removes both
// containers (their work was received) and the state file, and the page
// says so.
func cleanUpFromThePage(t *testing.T, page context.Context, repo, linear, slow string) {
	t.Helper()
	boardMust(t, "click clean up", chromedp.Do(page, chromedp.Click(chromedp.CSS(`button[data-action="cleanup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice[data-state="ok"]`)), chromedp.WaitVisible(chromedp.CSS(`#empty`))))
	notice, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`#notice`)))
	boardMust(t, "read the cleanup result", err)
	for _, want := range []string{"removed: ", "aimi-" + linear, "aimi-" + slow, "swarm-state.json removed"} {
		if !strings.Contains(notice, want) {
			t.Errorf("cleanup result %q lacks %q", notice, want)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, ".aimi", "swarm-state.json")); !os.IsNotExist(err) {
		t.Errorf("after the page's cleanup the state file is still there (%v)", err)
	}
}
