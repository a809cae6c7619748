package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/state"
)

// fakeGit is a hand-written GitAccess and Publisher.
type fakeGit struct {
	mu         sync.Mutex
	listening  []string
	granted    map[string]string // container -> branch
	revoked    []string
	revokedOf  map[string]int // swarm/container -> revocations
	published  []string
	unreceived map[string][]string // container -> commits
	forgotten  []string            // swarm ids
	forgetErr  error
	prepared   []string // swarm ids, in the order Prepare was asked
	prepareErr error    // Prepare's answer
	// preparedFirst: whether each grant's swarm had been prepared before it.
	preparedFirst map[string]bool
	// onPublish, when set, sees every Publish as it is called.
	onPublish func(name string)
	// salvage, when set, answers Salvage (and the container's work then
	// counts as received); without it Salvage fails.
	salvage func(name string) (string, error)
	// refused is what OnRefused set (refuse calls it).
	refused func(sb contract.Sandbox, reason string)
}

func (g *fakeGit) OnRefused(fn func(sb contract.Sandbox, reason string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = fn
}

// refuse reports a refusal of sb as the service would.
func (g *fakeGit) refuse(sb contract.Sandbox, reason string) {
	g.mu.Lock()
	fn := g.refused
	g.mu.Unlock()
	if fn != nil {
		fn(sb, reason)
	}
}

func (g *fakeGit) Prepare(ctx context.Context, repo, swarmID string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prepared = append(g.prepared, swarmID)
	return g.prepareErr
}

func (g *fakeGit) Forget(ctx context.Context, swarmID string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgotten = append(g.forgotten, swarmID) // asked, whatever it answers
	return g.forgetErr
}

func (g *fakeGit) Published(ctx context.Context, cb contract.ContainerBranch) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.published, cb.Container), nil
}

func (g *fakeGit) publishedNow() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.published)
}

func (g *fakeGit) forgottenNow() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.forgotten)
}

func (g *fakeGit) ListenOn(ctx context.Context, ip string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listening = append(g.listening, ip)
	return nil
}

func (g *fakeGit) Grant(ctx context.Context, cb contract.ContainerBranch, gateway string) (Grant, error) {
	name, branch := cb.Container, cb.Branch
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.granted == nil {
		g.granted = map[string]string{}
	}
	g.granted[name] = branch
	if g.preparedFirst == nil {
		g.preparedFirst = map[string]bool{}
	}
	g.preparedFirst[name] = slices.Contains(g.prepared, cb.Swarm)
	// The service holds the branches whose name ends in 1 (a resume).
	exists := strings.HasSuffix(branch, "1")
	return Grant{RepoURL: "https://172.30.0.1:7443/" + cb.Swarm + ".git", Token: "tok-SECRET-" + name, CAFile: "/var/lib/aimi/ca.pem", BranchExists: &exists}, nil
}

func (g *fakeGit) Revoke(sb contract.Sandbox) {
	swarmID, name := sb.Swarm, sb.Container
	g.mu.Lock()
	defer g.mu.Unlock()
	g.revoked = append(g.revoked, name)
	if g.revokedOf == nil {
		g.revokedOf = map[string]int{}
	}
	g.revokedOf[swarmID+"/"+name]++
}

func (g *fakeGit) Salvage(ctx context.Context, sb contract.Sandbox, branch string) (string, error) {
	name := sb.Container
	g.mu.Lock()
	salvage := g.salvage
	g.mu.Unlock()
	if salvage == nil {
		return "", errors.New("fakeGit cannot salvage")
	}
	tip, err := salvage(name)
	if err == nil {
		g.mu.Lock()
		delete(g.unreceived, name)
		g.mu.Unlock()
	}
	return tip, err
}

func (g *fakeGit) Publish(ctx context.Context, cb contract.ContainerBranch) (*string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.onPublish != nil {
		g.onPublish(cb.Container)
	}
	g.published = append(g.published, cb.Container)
	u := "https://github.example/org/repo/pull/" + cb.Branch
	return &u, nil
}

func (g *fakeGit) Unreceived(ctx context.Context, cb contract.ContainerBranch) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unreceived[cb.Container], nil
}

func TestLocalModeGrantsPublishesAndKeepsUnreceivedWork(t *testing.T) {
	repo, files := testRepo(t, []string{"lm1", "lm2"}, 1)
	var mu sync.Mutex
	specs := map[string]engine.Spec{}
	var requests []string
	eng := newFakeEngine(nil)
	eng.programs = func(s engine.Spec) program {
		specs[s.Name] = s // under eng.mu
		inner := scripted(0, storiesDone(1)...)
		return func(ctx context.Context, stdin <-chan []byte, emit func(string), term <-chan struct{}) (int, bool) {
			line := <-stdin
			mu.Lock()
			requests = append(requests, string(line))
			mu.Unlock()
			ch := make(chan []byte, 1)
			ch <- line
			return inner(ctx, ch, emit, term)
		}
	}
	git := &fakeGit{}
	m := newTestManager(t, eng, Config{Git: git, Publisher: git, RunnerEnv: map[string]string{"ANTHROPIC_API_KEY": "sk-VERY-SECRET"}})
	ctx := context.Background()
	if _, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 10*time.Second)

	if len(git.listening) == 0 || git.listening[0] != "172.30.0.1" {
		t.Errorf("git service listening on %v, want the network gateway", git.listening)
	}
	checkLocalModeContainers(t, git, specs, v)
	checkLocalModeRequests(t, requests)
	if len(git.published) != 2 || len(git.revoked) < 2 {
		t.Errorf("published %v revoked %v, want both containers", git.published, git.revoked)
	}
	// The pull request reaches the state file, not only the API's view.
	for _, sc := range validateStateFile(t, repo).Containers {
		if want := "https://github.example/org/repo/pull/" + sc.BranchName; sc.PRURL == nil || *sc.PRURL != want || sc.Status != state.StatusCompleted {
			t.Errorf("%s in the state file: status %s prUrl %v, want completed with %s", sc.ContainerName, sc.Status, sc.PRURL, want)
		}
	}

	t.Run("secrets stay out of state, journal and API answers", func(t *testing.T) {
		checkNoSecretInAimiOrView(t, repo, v)
	})

	t.Run("cleanup keeps a container whose work was not received", func(t *testing.T) {
		checkCleanupKeepsUnreceivedWork(t, ctx, m, git, repo, v)
	})
}

// checkLocalModeContainers checks each container was granted its branch,
// got the git token, the CA and the runner's secret in its environment and
// the CA mounted read-only, and has its pull request.
func checkLocalModeContainers(t *testing.T, git *fakeGit, specs map[string]engine.Spec, v api.SwarmView) {
	t.Helper()
	for _, d := range v.Containers {
		if git.granted[d.Name] != d.Branch {
			t.Errorf("%s: granted %q, want its branch %q", d.Name, git.granted[d.Name], d.Branch)
		}
		s := specs[d.Name]
		env := strings.Join(s.Env, "\n")
		for _, want := range []string{contract.EnvGitToken + "=tok-SECRET-" + d.Name, contract.EnvGitSSLCAInfo + "=" + caMountPath, "ANTHROPIC_API_KEY=sk-VERY-SECRET"} {
			if !strings.Contains(env, want) {
				t.Errorf("%s: env lacks %s", d.Name, want)
			}
		}
		if strings.Contains(env, "SSL_CERT_FILE=") {
			t.Errorf("%s: SSL_CERT_FILE set; it would replace the image's trust store for the agent", d.Name)
		}
		if len(s.Mounts) != 1 || s.Mounts[0].Target != caMountPath || !s.Mounts[0].ReadOnly {
			t.Errorf("%s: mounts %+v, want the CA read-only at %s", d.Name, s.Mounts, caMountPath)
		}
		if d.PRURL == nil || !strings.Contains(*d.PRURL, "pull") {
			t.Errorf("%s: prUrl %v, want the published PR", d.Name, d.PRURL)
		}
	}
}

// checkLocalModeRequests checks each task-request names the git service
// and whether the granted branch exists.
func checkLocalModeRequests(t *testing.T, requests []string) {
	t.Helper()
	for _, r := range requests {
		if !strings.Contains(r, `"repoUrl":"https://172.30.0.1:7443/`) {
			t.Errorf("task-request %s does not carry the git service URL", r)
		}
		_, req, err := acpmsg.ParseTaskRequest([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.HasSuffix(req.BranchName, "1"); req.BranchExists == nil || *req.BranchExists != want {
			t.Errorf("task-request %s: branchExists %v, want the grant's %t", r, req.BranchExists, want)
		}
	}
}

// checkNoSecretInAimiOrView checks the secrets stay out of the state file,
// the journals and the API's view v.
func checkNoSecretInAimiOrView(t *testing.T, repo string, v api.SwarmView) {
	t.Helper()
	var all bytes.Buffer
	filepath.Walk(filepath.Join(repo, ".aimi"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			all.Write(b)
		}
		return nil
	})
	vj, _ := json.Marshal(v)
	all.Write(vj)
	for _, secret := range []string{"sk-VERY-SECRET", "tok-SECRET"} {
		if bytes.Contains(all.Bytes(), []byte(secret)) {
			t.Errorf("secret %q found in state, journal or view", secret)
		}
	}
}

// checkCleanupKeepsUnreceivedWork checks cleanup keeps a container whose
// work the git service did not receive, and a forced cleanup removes it,
// reporting the lost commits and why the git service keeps the repository.
func checkCleanupKeepsUnreceivedWork(t *testing.T, ctx context.Context, m *Manager, git *fakeGit, repo string, v api.SwarmView) {
	t.Helper()
	keep := v.Containers[0].Name
	git.mu.Lock()
	git.unreceived = map[string][]string{keep: {"abc123"}}
	git.mu.Unlock()
	rep, err := m.Cleanup(ctx, repo, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Kept) != 1 || rep.Kept[0].Name != keep || len(rep.Removed) != 1 || rep.StateRemoved {
		t.Fatalf("report %+v, want %s kept and the other removed", rep, keep)
	}
	sw := validateStateFile(t, repo)
	if len(sw.Containers) != 1 || sw.Containers[0].ContainerName != keep {
		t.Errorf("state after cleanup: %+v", sw.Containers)
	}
	if f := git.forgottenNow(); len(f) != 0 {
		t.Errorf("git service told to forget %v while %s still holds work", f, keep)
	}
	git.mu.Lock()
	git.forgetErr = errors.New("branch(es) feat/x; the mirror is kept")
	git.mu.Unlock()
	rep, err = m.Cleanup(ctx, repo, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "the mirror is kept") {
		t.Errorf("report notes %v, want the git service's reason for keeping the repository", rep.Notes)
	}
	if len(rep.Lost) != 1 || !rep.StateRemoved {
		t.Errorf("forced cleanup report %+v, want the lost commits listed and the state gone", rep)
	}
	if f := git.forgottenNow(); len(f) != 1 || f[0] != v.State.SwarmID {
		t.Errorf("git service forgot %v, want exactly the swarm %s once its last container is gone", f, v.State.SwarmID)
	}
}

func TestJournalStreamsAndFollows(t *testing.T) {
	repo, files := testRepo(t, []string{"jr"}, 3)
	eng := newFakeEngine(byTask(nil, scripted(20*time.Millisecond, storiesDone(3)...)))
	m := newTestManager(t, eng, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := m.Start(ctx, api.StartRequest{RepoPath: repo, TaskFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	name := v.Containers[0].Name
	ch, err := m.Journal(ctx, api.LogsRequest{RepoPath: repo, Name: name, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []state.Record
	for r := range ch {
		recs = append(recs, r)
	}
	if len(recs) != 8 || recs[len(recs)-1].Type != "completion" {
		t.Errorf("followed journal: %d records, last %q; want 8 ending in the completion", len(recs), recs[len(recs)-1].Type)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
	// The end of a journal is read from the end.
	ch, err = m.Journal(ctx, api.LogsRequest{RepoPath: repo, Name: name, Tail: 3})
	if err != nil {
		t.Fatal(err)
	}
	var tail []int64
	for r := range ch {
		tail = append(tail, r.Seq)
	}
	if !slices.Equal(tail, []int64{6, 7, 8}) {
		t.Errorf("tail 3: seqs %v, want 6 7 8", tail)
	}
	if _, err := m.Journal(ctx, api.LogsRequest{RepoPath: repo, Name: "aimi-nope"}); !errors.Is(err, api.ErrUnknownContainer) {
		t.Errorf("unknown container: %v", err)
	}
	other := t.TempDir()
	if _, err := m.Journal(ctx, api.LogsRequest{RepoPath: other, Name: name}); !errors.Is(err, api.ErrNoSwarm) {
		t.Errorf("repo without swarm: %v", err)
	}
}

// TestTwoRepositoriesWithTheSameTaskFileNamesStartAtOnce: two repositories
// whose task files have the same names (so the same container names) start
// their swarms at the same moment, round after round. Both starts succeed,
// their containers get distinct names, every container of both swarms
// completes (none was removed or replaced by the other start), and no
// grant of one swarm is revoked by the other.
func TestTwoRepositoriesWithTheSameTaskFileNamesStartAtOnce(t *testing.T) {
	for round := range 8 {
		repoA, filesA := testRepo(t, []string{"same1", "same2"}, 1)
		repoB, filesB := testRepo(t, []string{"same1", "same2"}, 1)
		eng := newFakeEngine(func(engine.Spec) program { return scripted(time.Millisecond, storiesDone(1)...) })
		git := &fakeGit{}
		m := newTestManager(t, eng, Config{Git: git, Publisher: git})
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, req := range []api.StartRequest{{RepoPath: repoA, TaskFiles: filesA, Local: true}, {RepoPath: repoB, TaskFiles: filesB, Local: true}} {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[i] = m.Start(ctx, req) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: starts: %v / %v", round, errs[0], errs[1])
		}
		names := map[string]string{}
		for _, repo := range []string{repoA, repoB} {
			v := waitTerminal(t, m, repo, 10*time.Second)
			for _, d := range v.Containers {
				if d.Status != string(state.StatusCompleted) {
					t.Errorf("round %d: %s of %s ended %s (%+v)", round, d.Name, repo, d.Status, d.Errors)
				}
				if other, dup := names[d.Name]; dup {
					t.Errorf("round %d: %s used by %s and %s", round, d.Name, other, repo)
				}
				names[d.Name] = repo
				// Its grant was revoked once: when it finished, not by a
				// rollback of the other start.
				git.mu.Lock()
				if n := git.revokedOf[v.State.SwarmID+"/"+d.Name]; n != 1 {
					t.Errorf("round %d: the grant of %s of swarm %s was revoked %d times, want once (at its end)", round, d.Name, v.State.SwarmID, n)
				}
				git.mu.Unlock()
			}
		}
	}
}

// TestACompletionWhoseWorkWasNotReceivedEndsFailed: a container reports
// completed, but the git service lacks commits its branch holds (its
// pushes never arrived): it ends failed with GIT_PUSH_FAILED naming them
// and aimi swarm fetch, and nothing is published.
func TestACompletionWhoseWorkWasNotReceivedEndsFailed(t *testing.T) {
	repo, files := testRepo(t, []string{"unrecv"}, 1)
	eng := newFakeEngine(func(engine.Spec) program { return scripted(0, storiesDone(1)...) })
	git := &fakeGit{unreceived: map[string][]string{"aimi-unrecv": {"0123456789abcdef0123456789abcdef01234567"}}}
	m := newTestManager(t, eng, Config{Git: git, Publisher: git})
	if _, err := m.Start(context.Background(), api.StartRequest{RepoPath: repo, TaskFiles: files, Local: true}); err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, m, repo, 10*time.Second)
	d := v.Containers[0]
	var msgs []string
	for _, e := range d.Errors {
		msgs = append(msgs, e.Code+" "+e.Message)
	}
	joined := strings.Join(msgs, "\n")
	if d.Status != string(state.StatusFailed) || !strings.Contains(joined, acpmsg.CodeGitPushFailed) || !strings.Contains(joined, "0123456789ab") || !strings.Contains(joined, "aimi swarm fetch") {
		t.Fatalf("%s: %s, errors %q; want failed with %s naming the commit and the fetch", d.Name, d.Status, msgs, acpmsg.CodeGitPushFailed)
	}
	if p := git.publishedNow(); len(p) != 0 {
		t.Errorf("published %v although the work was not received", p)
	}
	if sw := validateStateFile(t, repo); sw.Containers[0].Status != state.StatusFailed {
		t.Errorf("state file: %s, want failed", sw.Containers[0].Status)
	}
}
