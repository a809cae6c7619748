package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/nstest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// askAgentPerl is the exec agent of the ask test (the image has perl,
// not curl): it fetches through the sandbox's proxy and writes one line
// per fetch to ask-out.txt, which the runner commits. feat/first fetches
// the asked host (with a query string), then a name of this machine, then
// waits for the test's gate and fetches the host again; feat/second waits
// for the gate and fetches it; feat/third fetches it once.
const askAgentPerl = `use strict; use IO::Socket::INET; use Time::HiRes qw(time sleep);
my $port = $ENV{PKGPORT};
chomp(my $branch = ` + "`git rev-parse --abbrev-ref HEAD`" + `);
open(my $out, '>', 'ask-out.txt') or die; select($out); $| = 1;
sub fetch {
	my ($url) = @_; my $t = time;
	my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => 3128, Proto => 'tcp', Timeout => 10) or return ("no proxy: $@", 0, '');
	print $c "GET $url HTTP/1.0\r\n\r\n";
	my $status = <$c> // ''; $status =~ s/\r?\n//; my $rest = do { local $/; <$c> } // '';
	my (undef, $body) = split(/\r?\n\r?\n/, $rest, 2);
	return ($status, time - $t, $body // '');
}
sub gate { for (1..900) { my (undef, undef, $b) = fetch("http://gate.corp.test:$port/gate"); return if $b =~ /^go/; sleep 0.3; } print "gate never opened\n"; }
if ($branch eq 'feat/first') {
	my ($s, $e) = fetch("http://pkg.corp.test:$port/first?token=QUERYSECRET"); printf "first %s after %.1f\n", $s, $e;
	my ($s2, $e2, $b2) = fetch("http://own.corp.test:$port/own"); $b2 =~ s/\s+/ /g; printf "own %s after %.1f: %s\n", $s2, $e2, $b2;
	gate(); my ($s3) = fetch("http://pkg.corp.test:$port/after"); print "after $s3\n";
} elsif ($branch eq 'feat/second') {
	gate(); my ($s) = fetch("http://pkg.corp.test:$port/second"); print "second $s\n";
} else {
	my ($s, $e) = fetch("http://pkg.corp.test:$port/third"); printf "third %s after %.1f\n", $s, $e;
}
`

// TestAnAgentAsksForTheHostItLacks: egress.ask on, egress.ask_wait 5s.
// A sandbox's agent fetches from a host no rule allows (a test server in
// a network namespace of the test's own, named pkg.corp.test through the
// daemon's own /etc/hosts: a private address, which the request says).
// Nobody answers: the connection is refused after the wait, and the
// request (kind fetch, "Reach HOST:PORT", the path without the query)
// stays in the inbox. A name resolving to this machine's own address is
// refused at once and never asked about. Answered swarm (aimi swarm
// answer), the grant is journaled and shown by aimi swarm egress for both
// containers; the first container's next fetch and a second container's
// first go through without a new request. The next swarm of the
// repository asks again: the grant is gone.
func TestAnAgentAsksForTheHostItLacks(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	lan := nstest.New(t)
	var pkgHits atomic.Int64
	var gateOpen atomic.Bool
	ln := lan.Listen(t, 0)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gate" {
			if gateOpen.Load() {
				_, _ = io.WriteString(w, "go")
				return
			}
			_, _ = io.WriteString(w, "wait")
			return
		}
		pkgHits.Add(1)
		_, _ = io.WriteString(w, "package")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := nstest.Port(ln.Addr())
	hosts := map[string]string{"pkg.corp.test": lan.Addr.String(), "gate.corp.test": lan.Addr.String(), "own.corp.test": lan.Peer.String()}
	target := fmt.Sprintf("pkg.corp.test:%d", port)

	repo := askRepo(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := fmt.Sprintf("agent:\n  kind: exec\n  command: PKGPORT=%d perl agent.pl\n  ask_timeout: 10m\ngit:\n  mode: local\n"+
		"egress:\n  allow:\n    - \"gate.corp.test:%d\"\n  ask: true\n  ask_wait: 5s\n", port, port)
	p := launch(t, daemonOpts{
		Sock: sock, DataDir: filepath.Join(dir, "data"), Config: config, Base: cleanEnv(),
		Env:  []string{"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m", "AIMI_SWARM_STOP_GRACE=2s"},
		Wrap: withHostsFile(t, hosts),
	})
	defer p.stop(t)
	run, _ := recordingAimi(ctx, repo, sock)
	if code, out, errOut := run("swarm", "start", "--files", "feat-first-tasks.json,feat-second-tasks.json", "--local"); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	req := waitInbox(t, run, 5*time.Minute, "the request to reach "+target, func(r []api.PermissionRequest) bool {
		return len(r) == 1 && r[0].Title == "Reach "+target
	})[0]
	sw := validState(t, repo)
	first, second := containerOf(t, sw, "feat-first").ContainerName, containerOf(t, sw, "feat-second").ContainerName
	if req.Kind != "fetch" || !strings.HasPrefix(req.Command, "GET /first") || !strings.Contains(req.Command, "private address") ||
		req.ContainerName != first || strings.Contains(req.Title+req.Command, "QUERYSECRET") {
		t.Errorf("request %+v: want kind fetch, GET /first without the query, the private address said, from %s", req, first)
	}
	// Nobody answers: the wait ends in a refusal, journaled; the request stays.
	testwait.Eventually(t, 2*time.Minute, "the refusal after egress.ask_wait in "+first+"'s journal", func() error {
		if code, logs, _ := run("swarm", "logs", first); code != 0 || !strings.Contains(logs, "nobody answered within egress.ask_wait") {
			return fmt.Errorf("journal:\n%s", logs)
		}
		return nil
	}, testwait.Every(time.Second))
	still := waitInbox(t, run, time.Minute, "the request still waiting", func(r []api.PermissionRequest) bool { return len(r) == 1 })
	if still[0].ID != req.ID {
		t.Errorf("after the wait the inbox holds %+v, want request %s", still, req.ID)
	}
	if code, out, errOut := run("swarm", "answer", req.ID, "swarm"); code != 0 || !strings.Contains(out, "answered swarm") {
		t.Fatalf("answer: exit %d\n%s\n%s", code, out, errOut)
	}
	checkGrantShown(t, run, target, first, second)
	gateOpen.Store(true)
	waitBranch(t, repo, "feat/first", 5*time.Minute)
	waitBranch(t, repo, "feat/second", 5*time.Minute)
	checkAskOutput(t, repo, "feat/first", `first HTTP/1\.[01] 403 [A-Za-z ]*after ([0-9.]+)`, "own HTTP/1.0 403", "not asked", "after HTTP/1.0 200")
	checkAskOutput(t, repo, "feat/second", "second HTTP/1.0 200")
	if n := pkgHits.Load(); n != 2 {
		t.Errorf("the asked host answered %d requests, want 2 (the first container's after the answer, the second's)", n)
	}
	if code, logs, _ := run("swarm", "logs", first); code != 0 || !regexp.MustCompile(`egress granted: `+regexp.QuoteMeta(target)+` by a person \([^)]*uid `+strconv.Itoa(os.Getuid())+`\), scope swarm`).MatchString(logs) {
		t.Errorf("the grant is not in %s's journal:\n%s", first, logs)
	}
	nextSwarmAsksAgain(t, run, repo, sock, sw.SwarmID, target)
}

// askRepo is a repository with three task files (feat/first, feat/second,
// feat/third) and the ask agent.
func askRepo(t *testing.T) string {
	t.Helper()
	files := map[string]string{"agent.pl": askAgentPerl}
	for _, b := range []string{"second", "third"} {
		files[".aimi/tasks/feat-"+b+"-tasks.json"] = string(taskFileJSON("feat/"+b, 1))
	}
	return scriptRepo(t, "feat/first", files)
}

// checkGrantShown: aimi swarm egress shows the swarm grant for both
// containers, beside the config's rule.
func checkGrantShown(t *testing.T, run func(args ...string) (int, string, string), target string, names ...string) {
	t.Helper()
	code, out, errOut := run("swarm", "egress", "--json")
	var entries []struct {
		Name  string           `json:"name"`
		Rules *api.EgressRules `json:"rules"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &entries) != nil {
		t.Fatalf("swarm egress --json: exit %d\n%s\n%s", code, out, errOut)
	}
	got := map[string]*api.EgressRules{}
	for _, e := range entries {
		got[e.Name] = e.Rules
	}
	for _, n := range names {
		r := got[n]
		if r == nil || !r.Ask || len(r.Config) != 1 || len(r.Granted) != 1 || r.Granted[0].Rule != target || r.Granted[0].Scope != "swarm" || r.Granted[0].By != "person" || r.Granted[0].Who == "" {
			t.Errorf("swarm egress for %s: %+v, want the config's gate rule and %s granted to the swarm by a person", n, r, target)
		}
	}
	if code, out, _ := run("swarm", "egress", names[0]); code != 0 || !strings.Contains(out, target+"  swarm  by a person") {
		t.Errorf("swarm egress %s: exit %d\n%s", names[0], code, out)
	}
}

// checkAskOutput reads branch's ask-out.txt and checks each pattern (the
// first a regexp whose group is the first fetch's seconds, at least the
// wait's 5).
func checkAskOutput(t *testing.T, repo, branch string, want ...string) {
	t.Helper()
	out := gittest.Git(t, repo, "show", branch+":ask-out.txt")
	t.Logf("%s:\n%s", branch, out)
	for i, w := range want {
		if i == 0 && strings.Contains(w, "(") {
			m := regexp.MustCompile(w).FindStringSubmatch(out)
			if m == nil {
				t.Errorf("%s: no line matching %q", branch, w)
				continue
			}
			if s, _ := strconv.ParseFloat(m[1], 64); s < 4.5 {
				t.Errorf("%s: the unanswered fetch was refused after %ss, want after egress.ask_wait (5s)", branch, m[1])
			}
			continue
		}
		if !strings.Contains(out, w) {
			t.Errorf("%s: %q missing", branch, w)
		}
	}
}

// nextSwarmAsksAgain starts the repository's next swarm (feat/third) once
// the first is done: its fetch of the host is asked about anew (the
// swarm's grant ended with it), and a reject refuses it.
func nextSwarmAsksAgain(t *testing.T, run func(args ...string) (int, string, string), repo, sock, oldSwarm, target string) {
	t.Helper()
	waitFor(t, sock, repo, 3*time.Minute, "the first swarm's containers exited", allExited)
	if code, out, errOut := run("swarm", "start", "--file", "feat-third-tasks.json", "--local"); code != 0 {
		t.Fatalf("start of the next swarm: exit %d\n%s\n%s", code, out, errOut)
	}
	req := waitInbox(t, run, 5*time.Minute, "the next swarm's request to reach "+target, func(r []api.PermissionRequest) bool {
		return len(r) == 1 && r[0].Title == "Reach "+target
	})[0]
	if req.SwarmID == oldSwarm {
		t.Fatalf("the next start kept swarm %s", oldSwarm)
	}
	if code, out, errOut := run("swarm", "answer", req.ID, "reject"); code != 0 {
		t.Fatalf("answer reject: exit %d\n%s\n%s", code, out, errOut)
	}
	waitBranch(t, repo, "feat/third", 5*time.Minute)
	checkAskOutput(t, repo, "feat/third", "third HTTP/1.0 403")
}
