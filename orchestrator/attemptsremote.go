package orchestrator

import (
	"context"
	"fmt"
	"strings"

	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/publish"
	"github.com/aimi-tools/swarm/state"
)

// Best of N in remote git mode: every attempt pushed its branch
// (<branch>--aK) to origin, where it stays (the daemon deletes no branch
// of origin), so a losing attempt's commits stay reachable there; the
// daemon reads the tips through its copy of origin (origincopy.go), where
// the pick's lines and score are worked out as in local mode on the
// checkout. The picked attempt's tip becomes <branch> on origin: pushed
// from the copy, created or fast-forwarded, never forced (a pick by hand
// moves it only off the tip it replaces, a compare-and-swap), with one
// pull request when a publish token is set. The checkout is not written,
// as nothing in remote mode writes it.

// attemptsRepo is the repository holding the attempts' tips: the
// checkout in local mode (their kept refs), the daemon's copy of origin
// in remote mode ("" when there is none).
func (sw *swarm) attemptsRepo(ctx context.Context) string {
	if sw.local {
		return sw.repo
	}
	o, err := sw.originCopyOf(ctx)
	if err != nil {
		return ""
	}
	return o.dir
}

// tracksAttemptTips reports whether the pick knows each attempt's tip:
// its kept ref in local mode (with a Publisher), origin's branch in
// remote mode.
func (sw *swarm) tracksAttemptTips() bool {
	return !sw.local || sw.attemptPublisher() != nil
}

// keepAttemptRemote reads c's branch from origin into the copy (and
// origin's default branch, where the attempts started: the lines are
// counted from there) and notes its tip.
func (sw *swarm) keepAttemptRemote(ctx context.Context, g *attemptGroup, c *ctr) {
	o, err := sw.originCopyOf(ctx)
	if err == nil {
		_, err = o.sync(ctx, originGit, c.branch, o.onto)
	}
	var tip string
	if err == nil {
		tip, err = landGit.RevParse(ctx, o.dir, "refs/heads/"+c.branch)
	}
	if err != nil {
		sw.m.log.Warn("read an attempt's branch from origin", "swarm", sw.id, "container", c.name, "err", err)
		return
	}
	sw.noteAttemptTip(g, c, "", tip)
}

// publishPickRemote makes the picked attempt w's tip set's branch on
// origin (replace: the tip a pick by hand moves it off) and opens its
// pull request with the publish token. Done again after a restart it
// changes nothing: origin's branch holds the tip already, and the open
// pull request is found.
func (sw *swarm) publishPickRemote(ctx context.Context, set *state.AttemptSet, w *ctr, replace string) (*string, error) {
	o, err := sw.originCopyOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("publish the picked attempt: %w", err)
	}
	target := set.BranchName
	if _, err := o.sync(ctx, originGit, w.branch); err != nil {
		return nil, fmt.Errorf("publish %s as %s: %w", w.branch, target, err)
	}
	tip, err := landGit.RevParse(ctx, o.dir, "refs/heads/"+w.branch)
	if err != nil || tip == "" {
		return nil, fmt.Errorf("publish %s as %s: origin (%s) has no branch %s (did the attempt push?): %v", w.branch, target, o.url, w.branch, err)
	}
	theirs, _, err := o.remoteTips(ctx, originGit, []string{target})
	if err != nil {
		return nil, fmt.Errorf("publish %s as %s: %w", w.branch, target, err)
	}
	if cur := theirs[target]; cur != tip {
		if err := o.pushPick(ctx, w.branch, target, tip, cur, replace); err != nil {
			return nil, err
		}
		sw.m.log.Info("picked attempt published on origin", "swarm", sw.id, "container", w.name, "branch", target, "from", w.branch, "tip", tip, "was", cur)
	}
	return sw.pickPullRequest(ctx, o, set, w, target)
}

// pushPick moves origin's target from cur to the copy's src branch (tip):
// a pick by hand only off replace (or from nothing), by compare-and-swap;
// the daemon's pick creates the branch or fast-forwards it (origin
// refuses anything else). Never forced.
func (o *originCopy) pushPick(ctx context.Context, src, target, tip, cur, replace string) error {
	if replace != "" && cur != "" && cur != replace {
		return fmt.Errorf("publish %s: %w: origin's %s is at %.12s, not at the attempt picked before (%.12s), so it is not replaced; the picked attempt is origin's %s (%s): merge it by hand with 'git fetch origin %s && git merge FETCH_HEAD' on %s",
			target, publish.ErrMovedSincePick, target, cur, replace, src, tip, src, target)
	}
	var lease *string
	if replace != "" || cur == "" {
		lease = &cur // a compare-and-swap: origin's branch as it was just read
	}
	err := o.pushAs(ctx, src, target, lease)
	if err == nil {
		return nil
	}
	if s := err.Error(); !strings.Contains(s, "rejected") && !strings.Contains(s, "stale info") {
		return fmt.Errorf("publish %s: push the picked attempt (origin's %s) to origin (%s): %w; the pick is recorded and published again when the daemon restarts", target, src, o.url, err)
	}
	return fmt.Errorf("publish %s: origin (%s) refused it (%w): its %s (%.12s when asked) holds commits the picked attempt does not, and a pick never force-pushes; the picked attempt is origin's %s (%s): merge it by hand with 'git fetch origin %s && git merge FETCH_HEAD' on %s",
		target, o.url, err, target, cur, src, tip, src, target)
}

// pickPullRequest opens (or finds) target's pull request with the
// publish token, onto origin's default branch; nil without a token or a
// GitHub origin.
func (sw *swarm) pickPullRequest(ctx context.Context, o *originCopy, set *state.AttemptSet, w *ctr, target string) (*string, error) {
	body := fmt.Sprintf("Opened by aimi swarm (swarm %s): attempt %d of %d of `%s`, container `%s`, picked: %s.\n",
		sw.id, set.Pick.Attempt, len(set.Attempts), clip(set.TaskFilePath, 200), clip(w.name, 80), clip(set.Pick.Reason, 300))
	if log, err := landGit.Run(ctx, o.dir, "log", "--format=- %h %s", "-n", "50", "refs/heads/"+w.branch, "--not", "refs/heads/"+o.onto); err == nil && log != "" {
		body += "\nCommits:\n" + clip50(log) + "\n"
	}
	hr, err := sw.m.cfg.LandPR.PullRequest(ctx, gitcmd.Git{}, sw.repo, target, o.onto, body)
	if err != nil {
		return nil, fmt.Errorf("open the pull request of %s (the branch is on origin already): %w", target, err)
	}
	if hr.PRURL == "" {
		sw.m.log.Info("no pull request", "swarm", sw.id, "branch", target, "why", hr.Skipped)
		return nil, nil
	}
	return &hr.PRURL, nil
}

// clip50 is git log's lines, each on one line and cut short (subjects are
// the agent's).
func clip50(log string) string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		lines[i] = clip(l, 200)
	}
	return strings.Join(lines, "\n")
}

// pushAs pushes the copy's branch src to origin's branch dst, as push
// does (lease nil: origin takes a fast-forward only; else a
// compare-and-swap on *lease, "" for absent).
func (o *originCopy) pushAs(ctx context.Context, src, dst string, lease *string) error {
	o.talk.Lock()
	defer o.talk.Unlock()
	ctx, cancel := context.WithTimeout(ctx, originTalk)
	defer cancel()
	ref := "refs/heads/" + dst
	args := []string{"push", "--quiet", o.url}
	if lease != nil {
		args = append(args, "--force-with-lease="+ref+":"+*lease)
	}
	_, err := originGit.Run(ctx, o.dir, append(args, "refs/heads/"+src+":"+ref)...)
	return err
}
