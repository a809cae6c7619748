package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/internal/gittest"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// refusalFlood asks the egress proxy for a host no rule names N times, each
// on a connection of its own, and writes how many were refused with 403.
const refusalFlood = `use strict; use IO::Socket::INET;
my ($n, $refused) = ($ENV{FLOOD_N}, 0);
for (1 .. $n) {
	my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => 3128, Proto => 'tcp', Timeout => 5) or next;
	print $c "GET http://refused.invalid/ HTTP/1.0\r\n\r\n";
	my $status = <$c>; $refused++ if $status =~ m{^HTTP/1\.\d 403};
	close $c;
}
open(my $out, '>', 'flood-out.txt') or die; print $out "refused $refused of $n\n";
`

// TestEgressRefusalsAreSummedUpInTheDaemonsLog: a sandbox asks the egress
// proxy for a host no rule names 2,000 times in a row. Every request is
// answered 403 and the refusal is journaled (egress-denied), but the
// daemon's log holds the container's first few refusals one by one and
// then one line summing up the rest, not a line a refusal.
func TestEgressRefusalsAreSummedUpInTheDaemonsLog(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	const n = 2000
	image := sandboxImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	repo := scriptRepo(t, "feat/flood", map[string]string{"flood.pl": refusalFlood})
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	config := "agent:\n  kind: exec\n  command: FLOOD_N=" + strconv.Itoa(n) + " perl flood.pl\ngit:\n  mode: local\n"
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Config:  config,
		Base:    cleanEnv(),
		Env: []string{
			"AIMI_SANDBOX_IMAGE=" + image, "AIMI_SANDBOX_MEMORY=256m", "AIMI_SANDBOX_SWAP=256m",
			"AIMI_SWARM_STOP_GRACE=2s",
		},
	})
	defer p.stop(t)
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	waitBranch(t, repo, "feat/flood", 5*time.Minute)
	if out := gittest.Git(t, repo, "show", "feat/flood:flood-out.txt"); strings.TrimSpace(out) != fmt.Sprintf("refused %d of %d", n, n) {
		t.Fatalf("the flood was not refused request by request: %s", out)
	}
	name := validState(t, repo).Containers[0].ContainerName
	code, logs, errOut := aimi(ctx, "swarm", "logs", name, "--repo", repo, "--socket", sock)
	if code != 0 || !strings.Contains(logs, "egress-denied") || !strings.Contains(logs, "GET refused.invalid:80") {
		t.Errorf("the refusal is not in the journal: exit %d\n%s\n%s", code, logs, errOut)
	}
	one := regexp.MustCompile(`msg="egress denied" container=` + regexp.QuoteMeta(name) + ` `)
	if got := len(one.FindAllString(p.logs(), -1)); got > 10 {
		t.Errorf("the daemon logged %d of the %d refusals one by one, want at most 10; log:\n%s", got, n, tail(p.logs(), 2000))
	}
	// The rest are summed up when the interval ends (a minute).
	sum := regexp.MustCompile(`container=` + regexp.QuoteMeta(name) + ` more=(\d+)`)
	var m []string
	testwait.Eventually(t, 3*time.Minute, "a line that sums up the refusals of "+name, func() error {
		if m = sum.FindStringSubmatch(p.logs()); m == nil {
			return fmt.Errorf("log:\n%s", tail(p.logs(), 4000))
		}
		return nil
	}, testwait.Every(500*time.Millisecond))
	if more, _ := strconv.Atoi(m[1]); more < n-10 {
		t.Errorf("the summary counts %d more refusals, want about %d", more, n)
	}
}
