package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/gitcmd"
)

// receivedTips is where a swarm's branches are read as they were pushed:
// the git service in local mode (TipSource), the daemon's copy of origin
// in remote mode (originCopy). The radar and the land read nothing else.
type receivedTips interface {
	Received(sb contract.Sandbox, branch string) (repo, tip string, err error)
}

// originCopy is the daemon's copy of a remote-mode swarm's origin: a bare
// repository of its own under Config.OriginDir holding, under their own
// names, the branches of origin the swarm needs (its containers', the
// landing target, the land's own), fetched when asked. The radar and the
// land work on it as they do on the git service's mirror in local mode;
// the user's checkout is never written.
type originCopy struct {
	dir string
	// url is origin's URL as the checkout resolves it (insteadOf
	// applied, no password): what the swarm's containers clone.
	url string
	// onto is origin's default branch (its HEAD) when the copy was made.
	onto string
	// talk serialises conversations with origin: the radar's and a
	// land's fetches must not race on the same refs.
	talk sync.Mutex
}

// originTalk bounds one conversation with origin (ls-remote, fetch,
// push): a land holds the repository's lock meanwhile.
const originTalk = 2 * time.Minute

// originGit talks to origin with the user's git configuration and
// credentials, as the checkout would (the daemon's questions to origin in
// remote mode all do; docs/unreceived-work.md); the copy's own commands
// run hermetic (landGit).
var originGit = gitcmd.Git{}

// originCopyOf is the swarm's copy of origin (made on first use); nil in
// local mode.
func (sw *swarm) originCopyOf(ctx context.Context) (*originCopy, error) {
	if sw.local {
		return nil, nil
	}
	sw.mu.Lock()
	o := sw.origin
	sw.mu.Unlock()
	if o != nil {
		return o, nil
	}
	if sw.repoURL == "" {
		return nil, fmt.Errorf("the swarm of %s has no origin URL (remote mode): add a remote 'origin' to the checkout", sw.repo)
	}
	o = &originCopy{dir: filepath.Join(sw.m.cfg.OriginDir, sw.id+".git"), url: sw.repoURL}
	if err := o.make(ctx, sw.m.cfg.OriginCAFile, sw.repo); err != nil {
		return nil, err
	}
	sw.mu.Lock()
	if sw.origin == nil {
		sw.origin = o
	}
	o = sw.origin
	sw.mu.Unlock()
	return o, nil
}

// make creates the bare repository (once) and reads origin's default
// branch, which becomes the copy's HEAD: the radar's target, and a land's
// without --onto.
func (o *originCopy) make(ctx context.Context, caFile, checkout string) error {
	if _, err := os.Stat(filepath.Join(o.dir, "HEAD")); err != nil {
		if err := os.MkdirAll(filepath.Dir(o.dir), 0o700); err != nil {
			return fmt.Errorf("make the daemon's copy of origin: %w", err)
		}
		if _, err := landGit.Run(ctx, "", "init", "--quiet", "--bare", o.dir); err != nil {
			return fmt.Errorf("make the daemon's copy of origin in %s: %w", o.dir, err)
		}
	}
	if caFile == "" {
		// The CA the checkout trusts for origin, when it names one.
		caFile, _ = originGit.Run(ctx, checkout, "config", "--get", "http.sslCAInfo")
	}
	if caFile != "" {
		if _, err := landGit.Run(ctx, o.dir, "config", "http.sslCAInfo", caFile); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, originTalk)
	defer cancel()
	out, err := originGit.Run(ctx, o.dir, "ls-remote", "--symref", o.url, "HEAD")
	if err != nil {
		return fmt.Errorf("ask origin (%s) for its default branch: %w", o.url, err)
	}
	if o.onto = symrefHead(out); o.onto == "" {
		return fmt.Errorf("origin (%s) names no default branch (an empty repository?): push one, or land with --onto", o.url)
	}
	_, err = landGit.Run(ctx, o.dir, "symbolic-ref", "HEAD", "refs/heads/"+o.onto)
	return err
}

// Received is branch's tip in the copy, as origin had it at the last
// fetch ("" when the copy has none). The container is not asked: origin's
// branch is the container's.
func (o *originCopy) Received(_ contract.Sandbox, branch string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tip, err := landGit.RevParse(ctx, o.dir, "refs/heads/"+branch)
	return o.dir, tip, err
}

// sync fetches those of branches whose tip on origin differs from the
// copy's (one ls-remote, then one fetch of the moved ones; a branch
// origin lacks is left as it is) and says how much CPU git took. g is
// the git to run (the radar's runs niced).
func (o *originCopy) sync(ctx context.Context, g gitcmd.Git, branches ...string) (time.Duration, error) {
	o.talk.Lock()
	defer o.talk.Unlock()
	ctx, cancel := context.WithTimeout(ctx, originTalk)
	defer cancel()
	theirs, cpu, err := o.remoteTips(ctx, g, branches)
	if err != nil {
		return cpu, err
	}
	var moved []string
	for _, b := range slices.Sorted(maps.Keys(theirs)) {
		if mine, _ := landGit.RevParse(ctx, o.dir, "refs/heads/"+b); mine != theirs[b] {
			moved = append(moved, "+refs/heads/"+b+":refs/heads/"+b)
		}
	}
	if len(moved) == 0 {
		return cpu, nil
	}
	args := append([]string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", o.url}, moved...)
	_, c, err := g.RunEnvCPU(ctx, o.dir, nil, args...)
	if err != nil {
		return cpu + c, fmt.Errorf("fetch the swarm's branches from origin (%s): %w", o.url, err)
	}
	return cpu + c, nil
}

// remoteTips is origin's tip of each of branches it has.
func (o *originCopy) remoteTips(ctx context.Context, g gitcmd.Git, branches []string) (map[string]string, time.Duration, error) {
	args := []string{"ls-remote", "--heads", o.url}
	for _, b := range branches {
		if gitref.CheckBranch(b) == nil {
			args = append(args, "refs/heads/"+b)
		}
	}
	out, cpu, err := g.RunEnvCPU(ctx, o.dir, nil, args...)
	if err != nil {
		return nil, cpu, fmt.Errorf("ask origin (%s) for the swarm's branches: %w", o.url, err)
	}
	return lsRemoteHeads(out, branches), cpu, nil
}

// lsRemoteHeads reads git ls-remote's answer (origin's: untrusted): the
// tip of each of branches it names, nothing else.
func lsRemoteHeads(out string, branches []string) map[string]string {
	tips := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		oid, ref, ok := strings.Cut(line, "\t")
		b, isHead := strings.CutPrefix(ref, "refs/heads/")
		// ls-remote matches a pattern by its tail: keep the names asked.
		if ok && isHead && gitref.ValidOID(oid) && slices.Contains(branches, b) {
			tips[b] = oid
		}
	}
	return tips
}

// symrefHead is the branch HEAD names in git ls-remote --symref's answer
// (origin's: untrusted), "" when none or not a valid branch name.
func symrefHead(out string) string {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "ref: refs/heads/")
		if name, head, _ := strings.Cut(rest, "\t"); ok && head == "HEAD" && gitref.CheckBranch(name) == nil {
			return name
		}
	}
	return ""
}

// push pushes the copy's branch to origin's of the same name. With lease
// nil it is a plain push, which origin refuses unless it is a
// fast-forward; with lease, origin's branch is replaced only while it is
// *lease ("": absent), a compare-and-swap for the land's own scratch
// branches.
func (o *originCopy) push(ctx context.Context, branch string, lease *string) error {
	o.talk.Lock()
	defer o.talk.Unlock()
	ctx, cancel := context.WithTimeout(ctx, originTalk)
	defer cancel()
	ref := "refs/heads/" + branch
	args := []string{"push", "--quiet", o.url}
	if lease != nil {
		args = append(args, "--force-with-lease="+ref+":"+*lease)
	}
	_, err := originGit.Run(ctx, o.dir, append(args, ref+":"+ref)...)
	return err
}

// pushShared gives a land's own run its branch on origin, where its
// container clones it: origin's branch of that name (an earlier attempt's)
// is replaced only as it is now.
func (o *originCopy) pushShared(ctx context.Context, branch string) error {
	tips, _, err := o.remoteTips(ctx, originGit, []string{branch})
	if err != nil {
		return err
	}
	lease := tips[branch]
	if err := o.push(ctx, branch, &lease); err != nil {
		return fmt.Errorf("push the land's branch %s to origin (%s), where its container clones it: %w", branch, o.url, err)
	}
	return nil
}

// forgetOrigin removes the swarm's copy of origin (cleanup: the swarm is
// gone; origin keeps every branch).
func (m *Manager) forgetOrigin(sw *swarm) {
	if sw.local {
		return
	}
	dir := filepath.Join(m.cfg.OriginDir, sw.id+".git")
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("remove the daemon's copy of origin", "swarm", sw.id, "dir", dir, "err", err)
	}
}
