package gitserve

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/gitref"
	"github.com/aimi-tools/swarm/internal/daemonca"
	"github.com/aimi-tools/swarm/internal/gitcmd"
	"github.com/aimi-tools/swarm/internal/svclisten"
)

// Names and defaults that other parts of aimi rely on.
const (
	// EnvAllowedRef is set by the service for every git http-backend run;
	// the mirrors' pre-receive hook refuses any ref other than its value
	// (and everything when it is unset).
	EnvAllowedRef = "AIMI_ALLOWED_REF"

	stateName = "grants.json" // 0600: token hashes, never tokens
	reposDir  = "repos"
)

// Errors of Grant, Received, Unreceived and Forget (errors.Is).
var (
	// ErrNotListening: Grant before any ListenOn, so there is no address to
	// put in the repository URL.
	ErrNotListening = errors.New("git service is not listening yet: call ListenOn with the swarm network's gateway IP first")
	// ErrUnknownContainer: the service never granted access to the
	// container, so it knows nothing of its work.
	ErrUnknownContainer = errors.New("the git service has no grant for this container")
	// ErrNothingReceived: the container was granted access but never pushed
	// its branch, so whether it made commits is unknown. Cleanup should
	// keep it (unless forced) when it may have done work.
	ErrNothingReceived = errors.New("the container never pushed its branch to the git service")
	// ErrUnpublished: Forget kept a mirror holding branch commits the
	// user's checkout does not have (a publish that failed or never ran).
	ErrUnpublished = errors.New("the swarm's repository holds commits your checkout does not have")
)

// Options configure a Service. DataDir is required; the rest has defaults.
type Options struct {
	// DataDir is the service's own directory: it holds the CA (ca.pem 0644,
	// ca-key.pem 0600), the mirrors (repos/<swarmID>.git) and the grants
	// (grants.json 0600). Created 0700 if missing.
	DataDir string
	// Logger receives the service's logs (default slog.Default()). Tokens,
	// Authorization headers and the CA key are never logged.
	Logger *slog.Logger
	// Backend is the path of git-http-backend (default: found through
	// `git --exec-path`).
	Backend string
	// TipProbe lets Unreceived ask what a container's branch really points
	// at (see TipProbe); the daemon gives an EngineProbe. Without one,
	// Unreceived judges from received pushes alone.
	TipProbe TipProbe
	// Trees lets Salvage read a container's .git (the daemon gives the
	// engine); without it Salvage fails with ErrNoTrees.
	Trees ContainerTrees
	// SweepInterval is how often addresses the host no longer has are
	// dropped (default svclisten.DefaultSweepInterval).
	SweepInterval time.Duration
	// Limits bound what containers can take of the service (see Limits).
	Limits Limits
	// OnPush, when set, hears every push (accepted: it moved the branch;
	// refused by the service otherwise). It must return at once.
	OnPush func(accepted bool)
}

// TipProbe reads the tip of a branch inside a container (for example by
// copying its .git refs out through the Engine API, which works on stopped
// containers too). It returns "" when the container has no such branch.
type TipProbe interface {
	BranchTip(ctx context.Context, containerName, branch string) (string, error)
}

// Grant is what a container needs to reach the service. Its fields match
// orchestrator.Grant one to one, so a conversion turns one into the other.
type Grant struct {
	RepoURL string // https://<ip>:<port>/<swarmID>.git
	Token   string // secret: into the container's environment only
	CAFile  string // host path of the CA certificate, to mount read-only
	// BranchExists: whether the mirror held the branch at the grant (nil:
	// unknown); the task-request tells the runner, which then clones
	// without asking the repository first.
	BranchExists *bool
}

// record is what the service remembers of one container, persisted in
// grants.json. The token is kept only as its SHA-256: enough to check it
// after a daemon restart, useless to anyone reading the file.
type record struct {
	Container string `json:"container"`
	SwarmKey  string `json:"swarmKey"`
	RepoPath  string `json:"repoPath"`
	Branch    string `json:"branch"`
	TokenHash string `json:"tokenHash,omitempty"` // "" once revoked
	// EarlierHash is the token of the grant before, still valid: a grant
	// again for the same container, branch and gateway is a daemon
	// restarted between handing a token over and noting it, and the
	// container may hold either (its runner reads only the first).
	EarlierHash string    `json:"earlierHash,omitempty"`
	GrantedAt   time.Time `json:"grantedAt"`
	// Gateway is the listening address the token works through; Peer the
	// one address it is accepted from, set at its first use.
	Gateway string `json:"gateway,omitempty"`
	Peer    string `json:"peer,omitempty"`
	// Pushed is true once a push from this container updated its branch;
	// Tip is the branch's value after its last push.
	Pushed   bool      `json:"pushed,omitempty"`
	Tip      string    `json:"tip,omitempty"`
	PushedAt time.Time `json:"pushedAt,omitzero"`
}

type persisted struct {
	// The port and addresses listened on: repository URLs handed to
	// running containers stay valid across daemon restarts.
	svclisten.Addresses
	Records []*record `json:"records"`
}

// Service is the git service. It implements the orchestrator's GitAccess
// (Grant through a conversion of Grant, see there), publish.Source and
// http.Handler.
type Service struct {
	dir     string
	repos   string
	log     *slog.Logger
	opts    Options
	ca      *daemonca.Authority
	backend string
	nice    string // nice(1), run in front of backend; "" when missing
	adverts advertCache
	bounds
	refusals refusals
	tips     tips

	// mirrorMu serializes mirror creation and refresh (git clone, fetch)
	// without holding mu. It guards userRefs and sources.
	mirrorMu sync.Mutex
	// userRefs is, per mirror, the user's branches and tags as last brought
	// in, so a Grant refreshes a mirror only when the checkout changed.
	userRefs map[string]string
	// sources is, per mirror, the repository it was seen to be made from.
	sources map[string]string
	refs    refListings

	// mu guards everything below; it is never held across git or network
	// calls, nor the state file's write (grants: see stageLocked).
	mu      sync.Mutex
	byName  map[contract.Sandbox]*record // one per container of a swarm
	byToken map[string]*record           // token hash -> record
	listen  *svclisten.Shell

	grants     *grantsFile
	ask        askSlot
	budget     budgetSlot
	workspaces *workspaces
}

// New opens (or creates) the service's data directory and CA. It does not
// listen yet: ListenOn does, once the swarm network's gateway is known.
func New(opts Options) (*Service, error) {
	if opts.DataDir == "" {
		return nil, errors.New("git service: Options.DataDir is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("git service data dir %q: %w", opts.DataDir, err)
	}
	s := &Service{
		dir:        dir,
		repos:      filepath.Join(dir, reposDir),
		log:        opts.Logger.With("component", "gitserve"),
		opts:       opts,
		byName:     map[contract.Sandbox]*record{},
		byToken:    map[string]*record{},
		userRefs:   map[string]string{},
		sources:    map[string]string{},
		workspaces: newWorkspaces(),
	}
	s.grants = newGrantsFile(filepath.Join(dir, stateName))
	if err := os.MkdirAll(s.repos, 0o700); err != nil {
		return nil, fmt.Errorf("create git service data dir %s: %w", s.repos, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict git service data dir %s: %w", dir, err)
	}
	if err := s.initBounds(opts.Limits); err != nil {
		return nil, err
	}
	s.backend = opts.Backend
	if s.backend == "" {
		execPath, err := gitcmd.Git{}.Run(context.Background(), dir, "--exec-path")
		if err != nil {
			return nil, fmt.Errorf("git service needs git (git --exec-path failed: %w); install git", err)
		}
		s.backend = filepath.Join(execPath, "git-http-backend")
	}
	if _, err := exec.LookPath(s.backend); err != nil {
		return nil, fmt.Errorf("git service: git-http-backend not usable at %s: %w (install git's full package or set Options.Backend)", s.backend, err)
	}
	// Without nice(1) (coreutils) the backend runs at the daemon's
	// priority: slower answers under load, nothing else.
	if nice, err := exec.LookPath("nice"); err == nil {
		s.nice = nice
	} else {
		s.log.Info("nice not found; git http-backend runs at the daemon's priority", "err", err)
	}
	ca, created, err := daemonca.LoadOrCreate(dir)
	if err != nil {
		return nil, err
	}
	s.ca = ca
	s.listen = s.newListeners()
	if created {
		s.log.Info("created the git service CA", "cert", s.CAFile())
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.listen.Start(opts.SweepInterval)
	return s, nil
}

// CAFile is the host path of the CA certificate (PEM) that containers must
// trust: mount it read-only and point GIT_SSL_CAINFO (git only, not SSL_CERT_FILE) at
// the mounted path.
func (s *Service) CAFile() string { return filepath.Join(s.dir, daemonca.CertName) }

var (
	swarmKeyRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
	containerRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$`)
)

// Grant gives container cb.Container of swarm cb.Swarm a fresh token for
// the swarm's repository (a bare mirror of cb.Repo, made at the swarm's
// first Grant) that may clone, fetch and push refs/heads/<cb.Branch>. A new Grant for the
// same container of the same swarm replaces its token; what it pushed
// before is remembered. Grants are per swarm: a container of another swarm
// with the same name (another repository's, started at the same moment)
// is another grant, which this one never touches.
//
// gateway is the swarm network's gateway (given to ListenOn before): the
// repository URL names it, and the token works only through it, and only
// from the first address it is used from (the container's, whose first git
// command is its clone). "" takes the address of the latest ListenOn.
func (s *Service) Grant(ctx context.Context, cb contract.ContainerBranch, gateway string) (Grant, error) {
	repoPath, swarmID, containerName, branch := cb.Repo, cb.Swarm, cb.Container, cb.Branch
	if err := checkSwarmRepo("grant", repoPath, swarmID); err != nil {
		return Grant{}, err
	}
	switch {
	case !containerRe.MatchString(containerName):
		return Grant{}, fmt.Errorf("git service grant: invalid container name %q", containerName)
	case gitref.CheckBranch(branch) != nil:
		return Grant{}, fmt.Errorf("git service grant: %w", gitref.CheckBranch(branch))
	}
	s.mu.Lock()
	ip := s.listen.LastLocked()
	if gateway != "" {
		ip = gateway
		if a := net.ParseIP(gateway); a != nil {
			ip = a.String()
		}
	}
	port := s.listen.PortLocked(ip)
	s.mu.Unlock()
	if port == 0 {
		return Grant{}, ErrNotListening
	}
	mirror, err := s.ensureMirror(ctx, repoPath, swarmID)
	if err != nil {
		return Grant{}, err
	}
	exists := mirrorHasBranch(ctx, mirror, branch)
	token, err := newToken()
	if err != nil {
		return Grant{}, err
	}
	s.mu.Lock()
	rec := s.grantLocked(cb, ip, token)
	saved := s.stageLocked()
	s.mu.Unlock()
	if err := saved(); err != nil {
		s.mu.Lock()
		// A grant again meanwhile (the same container) owns rec's tokens.
		if rec.TokenHash == hashToken(token) {
			s.dropTokensLocked(rec)
		}
		s.mu.Unlock()
		return Grant{}, err
	}
	s.log.Info("git access granted", "container", containerName, "swarm", swarmID, "branch", branch)
	switch {
	case cb.Base != "":
		s.prepareDelta(swarmID, branch, cb.Base)
	case !cb.Prefilled: // a prefilled sandbox asks for the tip only
		s.prepareWorkspace(swarmID, branch)
	}
	return Grant{
		RepoURL:      "https://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/" + swarmID + ".git",
		Token:        token,
		CAFile:       s.CAFile(),
		BranchExists: exists,
	}, nil
}

// grantLocked makes (or renews) the record of cb with token, valid
// through gateway ip.
func (s *Service) grantLocked(cb contract.ContainerBranch, ip, token string) *record {
	key := cb.Sandbox()
	rec := s.byName[key]
	earlier := ""
	if rec != nil {
		s.dropTokensLocked(rec)
		if rec.Branch == cb.Branch && rec.Gateway == ip {
			earlier = rec.TokenHash
		}
	}
	if rec == nil || rec.Branch != cb.Branch {
		rec = &record{Container: cb.Container, SwarmKey: cb.Swarm, Branch: cb.Branch}
	}
	rec.RepoPath = cb.Repo
	rec.Gateway, rec.Peer = ip, "" // a rerun's container has another address
	rec.TokenHash, rec.EarlierHash = hashToken(token), earlier
	rec.GrantedAt = time.Now().UTC()
	s.byName[key] = rec
	s.addTokensLocked(rec)
	return rec
}

// Revoke ends the access of container sb. What it pushed stays (Received
// and Unreceived still answer for it).
func (s *Service) Revoke(sb contract.Sandbox) {
	s.mu.Lock()
	rec := s.byName[sb]
	if rec == nil || rec.TokenHash == "" {
		s.mu.Unlock()
		return
	}
	s.dropTokensLocked(rec)
	rec.TokenHash, rec.EarlierHash = "", ""
	saved := s.stageLocked()
	s.mu.Unlock()
	if err := saved(); err != nil {
		// The token is gone from memory; after a restart it would work
		// again until the next save. Say so.
		s.log.Warn("git access revoked in memory only: could not persist it", "container", sb.Container, "err", err)
		return
	}
	s.log.Info("git access revoked", "container", sb.Container)
}

// Forget deletes swarm swarmID's mirror and what the service remembers of
// its containers. Call it once no container of the swarm is left (cleanup).
// A mirror with a branch whose commits the user's checkout lacks (its
// publish failed or never ran, say the daemon died in between) is kept,
// records and all, and the error (ErrUnpublished) says how to fetch them:
// the mirror is then the only copy of that work. Forgetting a swarm the
// service never saw is not an error.
func (s *Service) Forget(ctx context.Context, swarmID string) error {
	if !swarmKeyRe.MatchString(swarmID) {
		return fmt.Errorf("git service forget: swarm id %q is not a repository name of this service", swarmID)
	}
	if err := s.checkPublished(ctx, swarmID); err != nil {
		return err
	}
	s.mu.Lock()
	forgot := 0
	for key, rec := range s.byName {
		if key.Swarm != swarmID {
			continue
		}
		s.dropTokensLocked(rec)
		delete(s.byName, key)
		forgot++
	}
	saved := func() error { return nil }
	if forgot > 0 {
		saved = s.stageLocked()
	}
	s.mu.Unlock()
	if saveErr := saved(); saveErr != nil {
		return fmt.Errorf("git service forget %s: %w", swarmID, saveErr)
	}

	s.slots.forget(swarmID)
	s.adverts.forget(s.mirrorPath(swarmID))
	s.forgetWorkspaces(swarmID)
	s.mirrorMu.Lock()
	defer s.mirrorMu.Unlock()
	delete(s.userRefs, swarmID)
	delete(s.sources, swarmID)
	dst := s.mirrorPath(swarmID)
	if _, err := os.Stat(dst); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Renamed away first, so a half-deleted mirror is never served.
	gone, err := os.MkdirTemp(s.repos, ".forget-"+swarmID+"-")
	if err != nil {
		return fmt.Errorf("git service forget %s: %w", swarmID, err)
	}
	if err := os.Rename(dst, filepath.Join(gone, "m.git")); err != nil {
		os.Remove(gone)
		return fmt.Errorf("git service forget %s: move the mirror away: %w", swarmID, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("git service forget %s: delete the mirror: %w (remove %s by hand)", swarmID, err, gone)
	}
	s.log.Info("git service forgot a swarm", "swarm", swarmID, "containers", forgot)
	return nil
}

// Received returns the repository holding the branch of container sb as
// the service received it (the swarm's mirror) and the
// branch's value after the container's last push, "" when it never pushed.
// It is what package publish reads to bring the branch into the user's
// checkout.
func (s *Service) Received(sb contract.Sandbox, branch string) (repo, tip string, err error) {
	containerName := sb.Container
	rec, ok := s.recordByName(sb)
	if !ok {
		return "", "", fmt.Errorf("received branch of %s: %w", containerName, ErrUnknownContainer)
	}
	if rec.Branch != branch {
		return "", "", fmt.Errorf("received branch of %s: it was granted branch %s, not %s", containerName, rec.Branch, branch)
	}
	if !rec.Pushed {
		return s.mirrorPath(rec.SwarmKey), "", nil
	}
	return s.mirrorPath(rec.SwarmKey), rec.Tip, nil
}

// lookup returns a copy of the record a token belongs to.
func (s *Service) lookup(token string) (record, bool) {
	if token == "" {
		return record{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Comparing hashes through a map keeps the check independent of how
	// many leading bytes of a guess are right.
	rec, ok := s.byToken[hashToken(token)]
	if !ok {
		return record{}, false
	}
	return *rec, true
}

// addTokensLocked makes rec's tokens (its current and earlier) valid.
func (s *Service) addTokensLocked(rec *record) {
	for _, h := range []string{rec.TokenHash, rec.EarlierHash} {
		if h != "" {
			s.byToken[h] = rec
		}
	}
}

// dropTokensLocked ends the validity of rec's tokens.
func (s *Service) dropTokensLocked(rec *record) {
	for _, h := range []string{rec.TokenHash, rec.EarlierHash} {
		if h != "" && s.byToken[h] == rec {
			delete(s.byToken, h)
		}
	}
}

// sandbox is the container rec is of. Records are keyed by it, not by
// the container's name alone: container names are the engine's and
// another repository's swarm may use the same one.
func (r record) sandbox() contract.Sandbox {
	return contract.Sandbox{Swarm: r.SwarmKey, Container: r.Container}
}

// fromOwnContainer reports whether a request with rec's token comes from
// where the token may be used: through its swarm's gateway and from the
// address that used it first (which it then becomes); or through its own
// container's socket, which says who is asking (ServeSandbox).
func (s *Service) fromOwnContainer(r *http.Request, rec record) bool {
	if through, own := fromSandbox(r, rec); through {
		return own && s.current(rec)
	}
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && rec.Gateway != "" {
		if host, _, err := net.SplitHostPort(la.String()); err != nil || host != rec.Gateway {
			return false
		}
	}
	return s.bindPeer(rec, peer)
}

// bindPeer reports whether rec's token is still its container's and used
// from peer, the address it was first used from or, at its first use, is
// now bound to.
func (s *Service) bindPeer(rec record, peer string) bool {
	s.mu.Lock()
	cur := s.byName[rec.sandbox()]
	if cur == nil || cur.TokenHash != rec.TokenHash {
		s.mu.Unlock()
		return false
	}
	if cur.Peer != "" {
		ok := cur.Peer == peer
		s.mu.Unlock()
		return ok
	}
	cur.Peer = peer
	saved := s.stageLocked()
	s.mu.Unlock()
	if err := saved(); err != nil {
		s.log.Warn("could not persist the address a token is bound to", "container", rec.Container, "err", err)
	}
	return true
}

// current reports whether rec's token is still its container's.
func (s *Service) current(rec record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.byName[rec.sandbox()]
	return cur != nil && cur.TokenHash == rec.TokenHash
}

func (s *Service) recordByName(sb contract.Sandbox) (record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.byName[sb]
	if !ok {
		return record{}, false
	}
	return *rec, true
}

// notePush records the branch value after a push from container sb.
func (s *Service) notePush(sb contract.Sandbox, tip string) {
	s.mu.Lock()
	rec := s.byName[sb]
	if rec == nil || (rec.Pushed && rec.Tip == tip) {
		s.mu.Unlock()
		return
	}
	rec.Pushed, rec.Tip, rec.PushedAt = true, tip, time.Now().UTC()
	saved := s.stageLocked()
	s.mu.Unlock()
	if err := saved(); err != nil {
		s.log.Warn("could not persist a received push", "container", sb.Container, "err", err)
	}
	s.tips.moved(sb)
}
