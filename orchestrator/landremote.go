package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/publish"
)

// A land in remote git mode works as in local mode (the same train, merge
// commits, fix-ups, checks, record and journal) on the daemon's copy of
// origin instead of the git service's mirror: the branches are fetched
// from origin first, a fix-up's or check's branch is pushed to origin
// (where its container clones it, as every remote-mode container does,
// with no token in the sandbox) and fetched back once it ran, and at the
// end the integration branch is pushed to origin, never forced, and one
// pull request opened with the publish token.

// landSource is where a land reads the swarm's branches: the git service
// (local mode) or the daemon's copy of origin (remote mode).
func (sw *swarm) landSource(ctx context.Context) (receivedTips, error) {
	if !sw.local {
		o, err := sw.originCopyOf(ctx)
		if err != nil {
			return nil, fmt.Errorf("land: %w", err)
		}
		return o, nil
	}
	src, ok := sw.m.cfg.Git.(TipSource)
	if !ok {
		return nil, &api.FieldError{Field: "repoPath", Reason: "landing a local-mode swarm needs the daemon's git service (git.mode: local)"}
	}
	return src, nil
}

// landTrainRemote is landTrain in remote mode: the landing target (onto,
// or origin's default branch) and every branch of the swarm fetched from
// origin into the copy, the target pinned where the train starts.
func (sw *swarm) landTrainRemote(ctx context.Context, o *originCopy, onto, branch string, rep *api.LandReport) (string, *land.Train, error) {
	onto = cmp.Or(onto, o.onto)
	if err := gitref.CheckBranch(onto); err != nil {
		return "", nil, &api.FieldError{Field: "onto", Reason: err.Error()}
	}
	branches := []string{onto}
	for _, c := range sw.list() {
		branches = append(branches, c.branch) // the land's own runs' too: an earlier land's fix-up may be taken
	}
	if tip, err := landGit.RevParse(ctx, o.dir, "refs/heads/"+branch); err != nil {
		return "", nil, err
	} else if tip == "" {
		// The copy was lost (a new data dir): origin's integration branch,
		// if an earlier land pushed one, is where this one goes on.
		branches = append(branches, branch)
	}
	if _, err := o.sync(ctx, originGit, branches...); err != nil {
		return "", nil, fmt.Errorf("land: %w", err)
	}
	commit, err := landGit.RevParse(ctx, o.dir, "refs/heads/"+onto)
	if err != nil {
		return "", nil, err
	}
	if commit == "" {
		return "", nil, &api.FieldError{Field: "onto", Reason: fmt.Sprintf("origin (%s) has no branch %q", o.url, onto)}
	}
	ontoRef := "refs/aimi/land-onto/" + strings.TrimPrefix(branch, LandBranchPrefix)
	if _, err := landGit.Run(ctx, o.dir, "update-ref", ontoRef, commit); err != nil {
		return "", nil, err
	}
	rep.Onto, rep.OntoCommit = onto, commit
	return o.dir, &land.Train{Git: landGit, Dir: o.dir, Ref: "refs/heads/" + branch, Onto: ontoRef}, nil
}

// share gives a land's own run its branch where its container clones it:
// origin in remote mode (the git service's mirror holds it already in
// local mode).
func (lr *landRun) share(ctx context.Context, branch string) error {
	if o, ok := lr.src.(*originCopy); ok {
		return o.pushShared(ctx, branch)
	}
	return nil
}

// refresh reads what a land's own run pushed: from origin into the copy
// in remote mode (the git service received it already in local mode).
func (lr *landRun) refresh(ctx context.Context, branch string) error {
	if o, ok := lr.src.(*originCopy); ok {
		if _, err := o.sync(ctx, originGit, branch); err != nil {
			return fmt.Errorf("land: read the land's branch %s back from origin: %w", branch, err)
		}
	}
	return nil
}

// pushLand pushes the integration branch to origin (a fast-forward or
// new: never forced) and opens its one pull request onto the target with
// the publish token; without one, Take is the page that opens it.
func (lr *landRun) pushLand(ctx context.Context, o *originCopy, rep *api.LandReport) error {
	if err := o.push(ctx, rep.Branch, nil); err != nil {
		return fmt.Errorf("land: push %s to origin (%s): %w; %s", rep.Branch, o.url, err, pushRefusedHint(err, rep.Branch))
	}
	rep.Origin = o.url
	sw := lr.sw
	h := sw.m.cfg.LandPR
	h.Base = rep.Onto
	hr, err := h.PullRequest(ctx, gitcmd.Git{}, sw.repo, rep.Branch, rep.Onto, landPRBody(sw.id, rep))
	switch {
	case err != nil:
		sw.m.log.Warn("land: the pull request was not opened", "swarm", sw.id, "branch", rep.Branch, "err", err)
		rep.Take = fmt.Sprintf("%s (opening it failed: %s)", openPRHint(ctx, sw.repo, rep), oneLine(err.Error()))
	case hr.PRURL != "":
		rep.PRURL = hr.PRURL
		sw.journalLand("pull request of %s onto %s: %s", rep.Branch, rep.Onto, hr.PRURL)
	default:
		sw.m.log.Info("land: no pull request", "swarm", sw.id, "why", hr.Skipped)
		rep.Take = openPRHint(ctx, sw.repo, rep)
	}
	return nil
}

// pushRefusedHint says what to do after origin refused the integration
// branch.
func pushRefusedHint(err error, branch string) string {
	if s := err.Error(); strings.Contains(s, "rejected") || strings.Contains(s, "non-fast-forward") || strings.Contains(s, "fetch first") {
		return fmt.Sprintf("origin's %s moved to commits this land does not hold, and a land never force-pushes: take what they hold ('git fetch origin %s'), delete that branch on origin ('git push origin --delete %s'), and land again", branch, branch, branch)
	}
	return "the land is kept in the daemon; land again once origin takes pushes"
}

// openPRHint is the one page (GitHub's compare view, for a remote it can
// read) or step that opens the land's pull request by hand.
func openPRHint(ctx context.Context, repo string, rep *api.LandReport) string {
	if raw, err := (gitcmd.Git{}).Run(ctx, repo, "config", "--get", "remote.origin.url"); err == nil {
		if r, err := publish.ParseRemote(raw); err == nil {
			return "open its pull request: " + r.CompareURL(rep.Onto, rep.Branch)
		}
	}
	return fmt.Sprintf("open a pull request of %s onto %s on origin (%s)", rep.Branch, rep.Onto, rep.Origin)
}

// landPRBody is the pull request's description: every branch's outcome,
// with the reason of a held one. Names and reasons come from task files
// and agents: each is one line, cut short.
func landPRBody(swarmID string, rep *api.LandReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Landed by `aimi swarm land` (swarm %s): the completed branches merged onto `%s` (%.12s), one merge commit each.\n\n", swarmID, rep.Onto, rep.OntoCommit)
	for _, outcome := range []string{string(land.Landed), string(land.Fixed), string(land.Held)} {
		var lines []string
		for _, r := range rep.Results {
			if r.Outcome != outcome {
				continue
			}
			line := fmt.Sprintf("- `%s` (%s, %s)", clip(r.Container, 80), clip(r.Branch, 120), clip(r.TaskFile, 120))
			if r.Merge != "" {
				line += fmt.Sprintf(": merge %.12s", r.Merge)
			}
			if len(r.Files) > 0 {
				line += "; conflicted: " + clip(strings.Join(r.Files, ", "), 300)
			}
			if r.Reason != "" {
				line += "; " + clip(r.Reason, 300)
			}
			lines = append(lines, line)
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "**%s** (%d)\n%s\n\n", outcome, len(lines), strings.Join(lines, "\n"))
		}
	}
	for _, k := range rep.Skipped {
		fmt.Fprintf(&b, "- not landed: `%s`: %s\n", clip(k.Name, 80), clip(k.Reason, 300))
	}
	return b.String()
}

// clip is s on one line, at most n bytes.
func clip(s string, n int) string {
	s = oneLine(s)
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "..."
	}
	return s
}
