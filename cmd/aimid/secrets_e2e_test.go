package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/board"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/state"
)

// noticeSecret is the agent.env value the agent below puts into its
// requests: as it is, upper-cased, and split by spaces.
const noticeSecret = "sk-test-NOTICESECRET-0123456789"

// secretAskPerl asks twice with agent.env's AIMI_TEST_KEY in the title and
// the command, then sends each request again until it is answered.
const secretAskPerl = `use POSIX qw(strftime); my $s = $ENV{AIMI_TEST_KEY}; (my $spaced = $s) =~ s/(.{4})/$1 /g;
my $now = strftime('%Y-%m-%dT%H:%M:%SZ', gmtime);
my @asks = (req('00000000000000a1', "deploy with $s", 'curl -H ' . uc($s), $now), req('00000000000000b2', 'token ' . uc($s), "echo $spaced", $now));
ask($_, 0.5) for @asks;
for my $body (@asks) { my $end = time + 300; while (time < $end) { last if ask($body, 30) =~ /"answered"/; sleep 1 } }
open(my $o, '>', 'asked.txt') or die; print $o "asked\n"; close $o;
`

// leaks reports whether s holds noticeSecret in any of the agent's forms:
// letters and digits alone, case folded, so that neither a case change
// nor a separator put between its parts hides it.
func leaks(s string) bool {
	return strings.Contains(skeletonOf(s), skeletonOf(noticeSecret))
}

func skeletonOf(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAskSecretsAreRedactedEverywhere: the exec agent in a sandbox puts
// the value of an agent.env variable (as it is, upper-cased, split by
// spaces) into the title and the command of its permission requests. It
// reaches none of the webhook's bodies, notify.command's argument,
// environment (the daemon's, where the value came from) or input, `aimi swarm inbox` (text and --json), the board's
// /api/inbox, the container's journal or the daemon's log: each shows
// [secret:AIMI_TEST_KEY] instead.
func TestAskSecretsAreRedactedEverywhere(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, _ := askAgentRepo(t, "asksecret", secretAskPerl)
	hook := newHookReceiver(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	cmdDir := shortDir(t)
	// The value comes from the daemon's environment, as a model key would.
	config := "agent:\n  kind: exec\n  command: perl agent.pl\n  env:\n    AIMI_TEST_KEY: ${NOTICE_TEST_SECRET}\ngit:\n  mode: local\nnotify:\n  webhooks: [" +
		hook.url + "/hook]\n  command: [" + noticeCommand(t, cmdDir) + "]\n"
	p := launch(t, daemonOpts{
		Sock:     sock,
		DataDir:  filepath.Join(dir, "data"),
		Config:   config,
		LogLevel: "debug",
		Base:     localEnv(),
		Env: []string{
			"NOTICE_TEST_SECRET=" + noticeSecret, "AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m",
			"AIMI_SANDBOX_SWAP=512m", "AIMI_SANDBOX_CPUS=1", "AIMI_SANDBOX_PIDS=256",
			"AIMI_AGENT_PERMISSION_POLICY=ask", "AIMI_AGENT_ASK_TIMEOUT=10m",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	reqs := waitInbox(t, run, 4*time.Minute, "both requests", func(r []api.PermissionRequest) bool { return len(r) == 2 })
	for _, r := range reqs {
		if !strings.Contains(r.Title, "[secret:AIMI_TEST_KEY]") || !strings.Contains(r.Command, "[secret:AIMI_TEST_KEY]") {
			t.Errorf("request %s: title %q, command %q: want [secret:AIMI_TEST_KEY] in both", r.ID, r.Title, r.Command)
		}
	}
	seen := map[string]string{}
	_, seen["aimi swarm inbox --json"], _ = run("swarm", "inbox", "--json")
	_, seen["aimi swarm inbox"], _ = run("swarm", "inbox")
	seen["the board's /api/inbox"] = boardInbox(t, ctx, sock)
	b := hook.waitFor(t, 2*time.Minute, "notice of the requests", func(b string) bool { return strings.Contains(b, "permission-request-waiting") })
	if !strings.Contains(b, "[secret:AIMI_TEST_KEY]") {
		t.Errorf("the notice does not say [secret:AIMI_TEST_KEY]: %s", b)
	}
	view := waitFor(t, sock, repo, time.Minute, "the container listed", func(v api.SwarmView) bool { return len(v.Containers) == 1 })
	name := view.Containers[0].Name
	if code, out, errOut := run("swarm", "answer", "--all-from", name, "reject"); code != 0 {
		t.Fatalf("answer --all-from: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, sock, repo, 3*time.Minute, "the container exited", allExited)
	sw := validState(t, repo)
	journal, err := os.ReadFile(state.Open(repo).JournalPath(contract.Sandbox{Swarm: sw.SwarmID, Container: name}))
	if err != nil {
		t.Fatal(err)
	}
	seen["the journal"] = string(journal)
	if !strings.Contains(seen["the journal"], "[secret:AIMI_TEST_KEY]") {
		t.Errorf("the journal does not say [secret:AIMI_TEST_KEY]")
	}
	_, seen["aimi swarm logs"], _ = run("swarm", "logs", name)
	hook.waitFor(t, time.Minute, "notice of the swarm's end", func(b string) bool { return strings.Contains(b, "swarm-finished") })
	seen["the webhook"] = strings.Join(hook.all(), "\n")
	runs, _ := os.ReadFile(filepath.Join(cmdDir, "runs.txt"))
	seen["notify.command"] = string(runs)
	seen["the daemon's log"] = p.logs()
	for where, text := range seen {
		if leaks(text) {
			t.Errorf("%s carries the secret:\n%s", where, text)
		}
	}
}

// boardInbox is the board's answer to GET /api/inbox.
func boardInbox(t *testing.T, ctx context.Context, sock string) string {
	t.Helper()
	bctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	full, base := startBoard(t, bctx, sock)
	u, err := url.Parse(full)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(u.Fragment)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/inbox", nil)
	req.Header.Set(board.TokenHeader, q.Get(board.TokenParam))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "[secret:AIMI_TEST_KEY]") {
		t.Errorf("board /api/inbox: HTTP %d %s", resp.StatusCode, body)
	}
	return string(body)
}
