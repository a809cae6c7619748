package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// A task file run several times (best of N, docs/attempts.md): each
// attempt's branch (<branch>--aK) is kept in the checkout under
// contract.AttemptRefPrefix, and the picked attempt's commits are
// published as the task file's branch, exactly as a single container's
// branch would be.

// ErrMovedSincePick: a pick by hand does not replace a branch that holds
// anything but the attempt picked before.
var ErrMovedSincePick = errors.New("the branch moved since the pick")

// KeepAttempt fetches the attempt cb's branch, as the Source received
// it, into the checkout as ref (under contract.AttemptRefPrefix; moved to
// the attempt's tip whatever it named: the ref is the attempt's own). It
// returns the tip, "" when the attempt never pushed.
func (p *Publisher) KeepAttempt(ctx context.Context, cb contract.ContainerBranch, ref string) (string, error) {
	if err := gitref.CheckRefFormat(ref); err != nil || len(ref) <= len(contract.AttemptRefPrefix) || ref[:len(contract.AttemptRefPrefix)] != contract.AttemptRefPrefix {
		return "", fmt.Errorf("keep attempt %s: %q is not a ref under %s", cb.Container, ref, contract.AttemptRefPrefix)
	}
	src, tip, err := p.src.Received(cb.Sandbox(), cb.Branch)
	if err != nil || tip == "" {
		return "", err
	}
	lock := p.checkoutLock(cb.Repo)
	lock.Lock()
	defer lock.Unlock()
	if _, err := userGit.Run(ctx, cb.Repo, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", src, "+refs/heads/"+cb.Branch+":"+ref); err != nil {
		return "", fmt.Errorf("keep attempt %s: fetch %s into %s as %s: %w", cb.Container, cb.Branch, cb.Repo, ref, err)
	}
	return userGit.RevParse(ctx, cb.Repo, ref)
}

// PublishAs publishes the attempt cb's branch as the task file's branch
// target: into the checkout (created or fast-forwarded, with Publish's
// refusals and its unpublished ref), then to the hosted remote with a
// pull request when configured. With replace set (a pick by hand), the
// branch may hold replace, the attempt picked before, and is then moved
// off it (compare-and-swap); holding anything else it is not moved
// (ErrMovedSincePick).
func (p *Publisher) PublishAs(ctx context.Context, cb contract.ContainerBranch, target, replace string) (*string, error) {
	src, tip, err := p.src.Received(cb.Sandbox(), cb.Branch)
	if err != nil {
		return nil, fmt.Errorf("publish %s of %s as %s: %w", cb.Branch, cb.Container, target, err)
	}
	if tip == "" {
		return nil, nil
	}
	lock := p.checkoutLock(cb.Repo)
	lock.Lock()
	defer lock.Unlock()
	tcb := cb
	tcb.Branch = target
	srcRef := "refs/heads/" + cb.Branch
	var res Result
	if replace != "" {
		res, err = replaceInCheckout(ctx, userGit, src, srcRef, tcb, replace)
	} else {
		keep := UnpublishedRef(tcb)
		if checkKeep(keep) != nil {
			keep = ""
		}
		res, err = intoCheckoutFrom(ctx, userGit, src, srcRef, tcb, keep)
	}
	if err != nil {
		return nil, err
	}
	p.log.Info("picked attempt published into the checkout", "container", cb.Container, "branch", target, "from", cb.Branch, "action", string(res.Action), "tip", res.New)
	return p.toHosted(ctx, src, cb.Repo, target, cb.Branch, cb.Container)
}

// replaceInCheckout moves refs/heads/<cb.Branch> from replace (or from
// nothing) to srcRef's tip in src; it refuses where IntoCheckout does
// (checked out, a rebase or bisect) and when the branch holds anything
// else.
func replaceInCheckout(ctx context.Context, g gitcmd.Git, src, srcRef string, cb contract.ContainerBranch, replace string) (Result, error) {
	repoPath, branch := cb.Repo, cb.Branch
	res := Result{Branch: branch}
	tip, err := g.RevParse(ctx, src, srcRef)
	if err != nil || tip == "" {
		return res, fmt.Errorf("publish %s: read %s in %s: %w", branch, srcRef, src, cmpErr(err, ErrNoBranch))
	}
	if _, err := g.Run(ctx, repoPath, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", src, srcRef); err != nil {
		return res, fmt.Errorf("publish %s: fetch from %s into %s: %w", branch, src, repoPath, err)
	}
	ref := "refs/heads/" + branch
	old, err := g.RevParse(ctx, repoPath, ref)
	if err != nil {
		return res, fmt.Errorf("publish %s: read the branch in %s: %w", branch, repoPath, err)
	}
	res.Old, res.New = old, old
	if old == tip {
		res.Action = UpToDate
		return res, nil
	}
	if old != "" && old != replace {
		return res, fmt.Errorf("publish %s: %w: it is at %s, not at the attempt picked before (%s), so it is not replaced; the picked attempt's tip is %s: merge it by hand with 'git merge %s' on %s",
			branch, ErrMovedSincePick, short(old), short(replace), short(tip), tip, branch)
	}
	why, err := refusal(ctx, g, repoPath, branch, "", tip)
	if err != nil {
		return res, err
	}
	if why != nil {
		return res, fmt.Errorf("publish %s: %w%s, so the branch is not moved: %smerge %s by hand", branch, why.err, why.detail, why.when, short(tip))
	}
	if _, err := g.Run(ctx, repoPath, "update-ref", "-m", "aimi: the attempt picked by hand becomes "+branch, ref, tip, old); err != nil {
		return res, fmt.Errorf("publish %s: update the branch in %s (did it change meanwhile? pick again): %w", branch, repoPath, err)
	}
	res.New, res.Action = tip, FastForwarded
	if old == "" {
		res.Action = Created
	}
	return res, nil
}

// cmpErr is err, or def when err is nil.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
