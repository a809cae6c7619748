package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/state"
)

// channelBurstSeconds is how long the agent of TestGitChannelBurstLeavesTheRunnersPushThrough
// opens connections to its git forward.
const channelBurstSeconds = 15

// channelBurstScript opens connections to the container's git forward (the
// loopback port AIMI_NET_FORWARD names) as fast as it can for $BURST
// seconds and never closes one: every third begins a TLS handshake it
// never finishes, the others say nothing. It says how many it tried and
// holds, then leaves them to a child of its own (outside the agent's
// process group, silent) that keeps holding them: what an agent's
// leftover process does.
const channelBurstScript = `
use IO::Socket::INET; use POSIX (); use Time::HiRes qw(time);
my ($port) = ($ENV{AIMI_NET_FORWARD} =~ /(\d+)=git\b/) or die "no git forward in AIMI_NET_FORWARD\n";
my $end = time + $ENV{BURST};
my ($tries, @held) = (0);
while (time < $end) {
	$tries++;
	my $c = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port, Timeout => 1) or next;
	syswrite($c, "\x16\x03\x01") if $tries % 3 == 0;
	push @held, $c;
}
print STDERR "burst over: $tries tries, " . scalar(@held) . " held\n";
if (fork() == 0) {
	POSIX::setsid();
	open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
	sleep 600;
	exit 0;
}
`

// TestGitChannelBurstLeavesTheRunnersPushThrough: the real daemon in
// local git mode and the real runner in the sandbox image, with an exec
// agent that opens connections to its own git forward as fast as it can
// for 15 s, never closing one (a child of its keeps them all after its
// story), then writes its story's file. The runner's push after the story
// must go through at once (its 15 s of retries, not the run's last push),
// and the container completes with its branch published: a burst from the
// agent's processes cannot take the connections the runner's own git
// requests need, and every connection the burst held is given back.
func TestGitChannelBurstLeavesTheRunnersPushThrough(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("builds the sandbox image and runs real containers")
	}
	image := sandboxImage(t)
	name := "chan-" + dockertest.RunID()[:6]
	repo := gitRepo(t, 1, name)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	agent := fmt.Sprintf(`AIMI_AGENT_COMMAND=BURST=%d perl -e '%s' && echo "$AIMI_STORY_ID" > "$AIMI_STORY_ID.txt"`, channelBurstSeconds, channelBurstScript)
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Local:   true,
		Env:     []string{"AIMI_AGENT_KIND=exec", agent},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if code, out, errOut := aimi(ctx, "swarm", "start", "--all", "--local", "--repo", repo, "--socket", sock); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	v := waitForOr(t, sock, repo, 6*time.Minute, "the bursting container ended", func(v api.SwarmView) bool {
		return len(v.State.Containers) == 1 && v.State.Containers[0].Status.Terminal()
	}, func(v api.SwarmView) string {
		return "journal:\n" + channelJournal(t, repo, v) + "\ndaemon log:\n" + tail(p.logs(), 3000)
	})
	c := v.State.Containers[0]
	journal := channelJournal(t, repo, v)
	if !strings.Contains(journal, "burst over") {
		t.Fatalf("the agent never ended its burst; journal:\n%s", journal)
	}
	if c.Status != state.StatusCompleted {
		t.Fatalf("container ended %s after the burst, want completed; journal:\n%s", c.Status, journal)
	}
	if strings.Contains(journal, "push after a story failed") {
		t.Errorf("the runner's push after the story failed for 15 s after the burst; journal:\n%s", journal)
	}
	if took := burstToCompletion(t, repo, v); took > 30*time.Second {
		t.Errorf("the completion came %s after the burst's end, want seconds; journal:\n%s", took, journal)
	} else {
		t.Logf("completed %s after the burst's end", took.Round(time.Millisecond))
	}
	waitBranch(t, repo, "feat/"+name, time.Minute)
	t.Logf("from the burst's end on:\n%s", journal)
	p.stop(t)
}

// channelJournal is the container's journal from the burst's end on (the
// agent's count, the runner's push), with times; all of it when the burst
// never ended.
func channelJournal(t testing.TB, repo string, v api.SwarmView) string {
	t.Helper()
	if len(v.State.Containers) != 1 {
		return "no container"
	}
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", v.State.SwarmID, v.State.Containers[0].ContainerName+".ndjson"))
	if err != nil {
		return err.Error()
	}
	from := 0
	for i, r := range recs {
		if strings.Contains(r.Raw, "burst over") {
			from = i
		}
	}
	var b strings.Builder
	for _, r := range recs[from:] {
		fmt.Fprintf(&b, "%s %s %s%s\n", r.Time.Format("15:04:05.000"), r.Stream, r.Type, tail(r.Raw+string(r.Message), 400))
	}
	return tail(b.String(), 8000)
}

// burstToCompletion is the time from the agent's "burst over" to the
// runner's completion message (the last push is before it).
func burstToCompletion(t testing.TB, repo string, v api.SwarmView) time.Duration {
	t.Helper()
	recs, err := state.ReadJournal(filepath.Join(repo, ".aimi", "swarm", v.State.SwarmID, v.State.Containers[0].ContainerName+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var over, done time.Time
	for _, r := range recs {
		switch {
		case strings.Contains(r.Raw, "burst over"):
			over = r.Time
		case r.Type == string(acpmsg.TypeCompletion):
			done = r.Time
		}
	}
	if over.IsZero() || done.IsZero() {
		t.Fatalf("no burst end (%v) or no completion (%v) in the journal", over, done)
	}
	return done.Sub(over)
}
