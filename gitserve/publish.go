package gitserve

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aimi-tools/swarm/publish"
)

// userGit runs git in the user's checkout with the user's own config: their
// proxies, insteadOf rewrites and hooks apply as when they run git.
var userGit = publish.Git{}

// Publish brings containerName's branch, as the service received it, into
// the user's checkout at repoPath as refs/heads/<branch> (created or
// fast-forwarded; a branch checked out there or diverged is not moved and
// the error says so and how to merge by hand). Then, when the daemon's
// environment has a GitHub token and the checkout's hosted remote is on
// GitHub, it pushes the branch there and opens (or finds) a pull request,
// whose URL it returns. A container that never pushed its branch has
// nothing to publish: (nil, nil).
func (s *Service) Publish(ctx context.Context, repoPath, branch, containerName string) (*string, error) {
	rec, ok := s.recordByName(containerName)
	if !ok {
		return nil, fmt.Errorf("publish %s of %s: %w", branch, containerName, ErrUnknownContainer)
	}
	mirror := s.mirrorPath(rec.SwarmKey)
	lock := s.checkoutLock(repoPath)
	lock.Lock()
	defer lock.Unlock()
	res, err := publish.IntoCheckout(ctx, userGit, repoPath, mirror, branch)
	if errors.Is(err, publish.ErrNoBranch) {
		s.log.Info("nothing to publish: the container never pushed its branch", "container", containerName, "branch", branch)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("branch published into the checkout", "container", containerName, "branch", branch, "action", string(res.Action), "tip", res.New)

	fallbackBase, _ := mirrorGit.Run(ctx, mirror, "symbolic-ref", "--quiet", "--short", "HEAD")
	hosted := publish.Hosted{
		RemoteName: s.opts.HostedRemote,
		GitHub: publish.GitHub{
			API:    s.opts.GitHubAPI,
			Token:  s.opts.Getenv(s.opts.TokenEnv),
			Client: s.opts.HTTPClient,
		},
		WebHost: s.opts.GitHubHost,
		Base:    s.opts.PRBase,
	}
	hr, err := hosted.Publish(ctx, userGit, repoPath, branch, fallbackBase, s.prBody(ctx, mirror, branch, containerName))
	if err != nil {
		return nil, fmt.Errorf("publish %s of %s to the hosted remote (the branch is in %s already): %w", branch, containerName, repoPath, err)
	}
	if hr.Skipped != "" {
		s.log.Info("no pull request", "container", containerName, "branch", branch, "why", hr.Skipped)
		return nil, nil
	}
	s.log.Info("pull request open", "container", containerName, "branch", branch, "url", hr.PRURL)
	return &hr.PRURL, nil
}

// prBody lists the branch's commits that the swarm's starting point lacks.
func (s *Service) prBody(ctx context.Context, mirror, branch, containerName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Opened by aimi swarm for container `%s`.\n", containerName)
	log, err := mirrorGit.Run(ctx, mirror, "log", "--format=- %h %s", "-n", "50", "refs/heads/"+branch, "--not", "HEAD")
	if err == nil && log != "" {
		b.WriteString("\nCommits:\n" + log + "\n")
	}
	return b.String()
}

// Unreceived lists commits of containerName's branch that neither the
// service nor the user's checkout has. The rule:
//
//   - With a TipProbe (the default: EngineProbe reads the branch out of the
//     container's workspace, stopped or not), the container's real branch
//     tip is compared: no branch there, or a tip found in the service's
//     mirror or in the checkout, means nothing is missing; otherwise the
//     answer is that tip (the commits behind it exist only in the
//     container, so their number is unknown; the tip names them). A probe
//     that fails (engine down) is an error: the caller keeps the container.
//   - Without one (Options.NoEngineProbe), the service judges from what it
//     received: a container that pushed its branch at least once is
//     taken to have delivered its work (the runner pushes after every
//     story's commit and reports a failed push in its completion), so the
//     answer is none; one that never pushed gets ErrNothingReceived: its
//     work, if any, is unknown and the caller should keep it unless forced
//     (or remove it when it knows no story ran).
//
// A container the service never granted gets ErrUnknownContainer.
func (s *Service) Unreceived(ctx context.Context, repoPath, containerName, branch string) ([]string, error) {
	rec, ok := s.recordByName(containerName)
	if !ok {
		return nil, fmt.Errorf("unreceived commits of %s: %w", containerName, ErrUnknownContainer)
	}
	if rec.Branch != branch {
		return nil, fmt.Errorf("unreceived commits of %s: it was granted branch %s, not %s", containerName, rec.Branch, branch)
	}
	if s.opts.TipProbe == nil {
		if rec.Pushed {
			return nil, nil
		}
		return nil, fmt.Errorf("container %s, branch %s: %w; commits it made, if any, exist only in the container", containerName, branch, ErrNothingReceived)
	}
	tip, err := s.opts.TipProbe.BranchTip(ctx, containerName, branch)
	if err != nil {
		return nil, fmt.Errorf("unreceived commits of %s: read its branch %s: %w", containerName, branch, err)
	}
	if tip == "" {
		return nil, nil
	}
	if !validOID(tip) {
		return nil, fmt.Errorf("unreceived commits of %s: its branch %s reads %q, not an object id", containerName, branch, clip(tip))
	}
	for _, dir := range []string{s.mirrorPath(rec.SwarmKey), repoPath} {
		if _, err := mirrorGit.Run(ctx, dir, "cat-file", "-e", tip+"^{commit}"); err == nil {
			return nil, nil
		}
	}
	return []string{tip}, nil
}
