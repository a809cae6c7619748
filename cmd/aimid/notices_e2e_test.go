package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/testwait"
	"github.com/aimi-tools/swarm/state"
)

// askPerl is the part of the agents below that puts permission requests
// straight on the container's ask socket (127.0.0.1:contract.AskPort, as
// the runner does), not through the runner: what a hostile agent can do.
// ask(body, wait) sends one and returns what came back within wait
// seconds ("" if nothing: the daemon holds a request it took).
var askPerl = `use strict; use IO::Socket::INET; use Time::HiRes qw(time sleep);
sub ask { my ($body, $wait) = @_;
	my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => ` + strconv.Itoa(contract.AskPort) + `, Proto => 'tcp', Timeout => 5) or return 'noconn';
	print $c "POST ` + contract.AskPath + ` HTTP/1.1\r\nHost: ask\r\nContent-Type: application/json\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n" . $body;
	my ($out, $end) = ('', time + $wait);
	while ((my $left = $end - time) > 0) {
		my $rin = ''; vec($rin, fileno($c), 1) = 1;
		last unless select($rin, undef, undef, $left);
		my $n = sysread($c, my $buf, 4096); last unless $n; $out .= $buf;
	}
	close $c; return $out;
}
sub req { my ($id, $title, $command, $asked) = @_;
	return '{"id":"' . $id . '","storyId":"US-001","askedAt":"' . $asked . '","question":{"toolCallId":"t' . $id .
		'","title":"' . $title . '","kind":"execute","command":"' . $command . '","options":[{"id":"allow","name":"Allow","kind":"allow_once"},{"id":"skip","name":"Skip","kind":"reject_once"}]}}';
}
`

// floodPerl asks 500 times with askedAt in the year 2000, each ask sent
// again after a refusal (429) until it is taken or 45 s have passed, and
// writes what it got to flood-out.txt.
const floodPerl = `my ($taken, $refused, $end) = (0, 0, time + 45);
for my $i (1 .. 500) {
	last if time > $end;
	my $body = req(sprintf('%016x', $i), "flood $i", "true", '2000-01-01T00:00:00Z');
	while (time < $end) {
		my $got = ask($body, 0.3);
		if ($got =~ m{^HTTP/1.1 429}) { $refused++; sleep 0.1; next }
		$taken++; last;
	}
}
open(my $o, '>', 'flood-out.txt') or die; print $o "taken $taken refused $refused\n"; close $o;
`

// noticeCommand is notify.command: it records each run (its argument, its
// environment and its standard input) in dir and whether another run was
// under way at the same time.
func noticeCommand(t *testing.T, dir string) string {
	t.Helper()
	script := filepath.Join(dir, "notice.sh")
	body := `#!/bin/sh
d='` + dir + `'
mkdir "$d/running" 2>/dev/null || echo overlap >> "$d/overlaps"
{ printf 'ARG %s\n' "$*"; env; cat; } >> "$d/runs.txt" </dev/null
echo run >> "$d/count"
sleep 0.2
rmdir "$d/running"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// askAgentRepo is inboxRepo with the exec agent's script committed as
// agent.pl.
func askAgentRepo(t *testing.T, name, script string) (repo, taskName string) {
	t.Helper()
	repo, taskName = inboxRepo(t, name, "")
	if err := os.WriteFile(filepath.Join(repo, "agent.pl"), []byte(askPerl+script), 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo)
	return repo, taskName
}

// TestAskFloodIsBoundedInNotices: the exec agent in a sandbox puts 500
// permission requests dated in the year 2000 on its ask socket, each sent
// again when refused. The daemon dates each request at its arrival (so
// none expires at once and frees its place), the webhook gets a bounded
// number of notices of waiting requests, one of them the coalesced "N more
// permission requests", notify.command runs as often and never twice at
// once, and the container's journal holds a bounded number of lines about
// permission requests.
func TestAskFloodIsBoundedInNotices(t *testing.T) {
	parallelLong(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	repo, _ := askAgentRepo(t, "askflood", floodPerl)
	hook := newHookReceiver(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	cmdDir := shortDir(t)
	config := "agent:\n  kind: exec\n  command: perl agent.pl\ngit:\n  mode: local\nnotify:\n  webhooks: [" + hook.url + "/hook]\n  command: [" + noticeCommand(t, cmdDir) + "]\n"
	started := time.Now()
	launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  config,
		Base:    localEnv(),
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=512m", "AIMI_SANDBOX_SWAP=512m",
			"AIMI_SANDBOX_CPUS=1", "AIMI_SANDBOX_PIDS=256", "AIMI_AGENT_PERMISSION_POLICY=ask",
			"AIMI_AGENT_ASK_TIMEOUT=10m",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--all", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	reqs := waitInbox(t, run, 4*time.Minute, "the flood's requests in the inbox", func(r []api.PermissionRequest) bool { return len(r) > 0 })
	for _, r := range reqs {
		if r.AskedAt.Before(started) || r.Deadline.Before(started.Add(9*time.Minute)) {
			t.Errorf("request %s dated %v (deadline %v): want its arrival, after %v", r.ID, r.AskedAt, r.Deadline, started)
		}
	}
	view := waitFor(t, sock, repo, 4*time.Minute, "the container exited", allExited)
	name := view.Containers[0].Name
	waiting := hook.count(func(b string) bool { return strings.Contains(b, `"kind":"permission-request-waiting"`) })
	t.Logf("webhook: %d notices of waiting requests, %d in all", waiting, hook.count(func(string) bool { return true }))
	if waiting > maxFloodNotices || waiting == 0 {
		t.Errorf("the webhook got %d notices of waiting requests: want 1 to %d", waiting, maxFloodNotices)
	}
	runs, _ := os.ReadFile(filepath.Join(cmdDir, "count"))
	if n := strings.Count(string(runs), "run"); n > maxFloodNotices+4 {
		t.Errorf("notify.command ran %d times: want at most %d", n, maxFloodNotices+4)
	}
	if b, err := os.ReadFile(filepath.Join(cmdDir, "overlaps")); err == nil {
		t.Errorf("notify.command ran twice at once %d times", strings.Count(string(b), "overlap"))
	}
	sw := validState(t, repo)
	lines := askJournalLines(t, repo, contract.Sandbox{Swarm: sw.SwarmID, Container: name})
	if lines > maxFloodJournal {
		t.Errorf("the journal holds %d lines about permission requests: want at most %d", lines, maxFloodJournal)
	}
	// The requests past the bound are told in one notice at the end of
	// the bound's window.
	hook.waitFor(t, 2*time.Minute, "coalesced notice", func(b string) bool { return strings.Contains(b, "more permission requests") })
}

// Bounds the flood test holds the daemon to: a notice per request up to
// the per-container bound, a coalesced one per window of the bound, over
// a run of a few minutes; the journal's lines of permission requests
// likewise.
const (
	maxFloodNotices = 12
	maxFloodJournal = 40
)

// askJournalLines counts the daemon's lines about permission requests in
// sb's journal.
func askJournalLines(t *testing.T, repo string, sb contract.Sandbox) int {
	t.Helper()
	recs, err := state.ReadJournal(state.Open(repo).JournalPath(sb))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Stream == state.StreamDaemon && strings.Contains(string(r.Message)+r.Raw, "permission request") {
			n++
		}
	}
	return n
}

// count counts the bodies received that match.
func (h *hookReceiver) count(match func(string) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, b := range h.bodies {
		if match(b) {
			n++
		}
	}
	return n
}

// waitFor waits up to d for a body that matches.
func (h *hookReceiver) waitFor(t *testing.T, d time.Duration, what string, match func(string) bool) string {
	t.Helper()
	var found string
	testwait.Eventually(t, d, "a webhook notice of "+what, func() error {
		h.mu.Lock()
		got := append([]string(nil), h.bodies...)
		h.mu.Unlock()
		for _, b := range got {
			if match(b) {
				found = b
				return nil
			}
		}
		return fmt.Errorf("none in %d notices: %s", len(got), fmt.Sprint(lastN(got, 5)))
	}, testwait.Every(200*time.Millisecond))
	return found
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
