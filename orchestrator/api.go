package orchestrator

import (
	"context"
	"log/slog"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/land"
	"github.com/aimi-tools/swarm/publish"
)

// Config is the daemon-wide configuration of the Manager. The configs package
// fills it from viper; zero values take the defaults named on each field.
type Config struct {
	// Image is the sandbox image when a api.StartRequest names none.
	Image string
	// MaxContainers bounds how many containers of one swarm run at once
	// (default 4). A api.StartRequest's Max overrides it for that swarm.
	MaxContainers int
	// Resource limits per container; 0 means the engine's default.
	CPUs            float64
	MemoryBytes     int64
	MemorySwapBytes int64 // memory+swap total, as the shell tools meant it
	PidsLimit       int64
	// DiskBytes limits each container's writable layer (0: no limit). Only
	// some storage drivers can; on the others every create fails, so aimid
	// checks at start and leaves it 0 there.
	DiskBytes int64
	// Timeout is the longest a container may run (default 2h); past it the
	// container is stopped and fails with CONTAINER_TIMEOUT.
	Timeout time.Duration
	// StopGrace is the SIGTERM-to-SIGKILL grace of Stop (default 30s).
	StopGrace time.Duration
	// StopWait is how long Stop waits past the grace for the containers
	// to end and their output to be read (default 2m): an engine that does
	// not answer must not hang the stop.
	StopWait time.Duration
	// CleanupWait bounds a whole forced cleanup (default 2m): whatever the
	// engine does, cleanup --force answers within it, naming what it left.
	CleanupWait time.Duration
	// Runtime is the OCI runtime ("" = engine default, e.g. "sysbox-runc");
	// with RequireRuntime a missing runtime refuses to start the container.
	Runtime        string
	RequireRuntime bool
	ReadOnlyRoot   bool
	// EnvVars is sent in every task-request's envVars (visible in the journal:
	// no secrets here).
	EnvVars map[string]string
	// RunnerEnv goes into the container's environment (agent kind and command,
	// API keys, git author): secrets belong here, and they are never logged,
	// journaled or returned. The names the runner reads are package
	// contract's Env* constants; the Manager sets the local-mode git ones
	// itself.
	RunnerEnv map[string]string
	// OriginCAFile is the host path of the PEM CA bundle origin's
	// certificate chains to: remote-mode containers get it read-only at
	// originCAPath, as GIT_SSL_CAINFO ("": the image's system roots).
	OriginCAFile string
	// Git is the local-mode git service; nil means remote mode only (the
	// repoUrl is the repository's origin).
	Git GitAccess
	// Models is the model gateway (package gateway), in both git modes;
	// nil when agent.env holds no model key. RunnerEnv then holds none
	// either: a container gets its grant's placeholders instead.
	Models ModelAccess
	// Net, when set, runs containers without a network and gives them
	// the daemon's services (git, the egress proxy) as sockets of their
	// own (package egress); the git service then listens on the loopback.
	Net SandboxNet
	// Publisher brings a local-mode container's branch into the user's
	// checkout once it completed; nil leaves the branch in the git service.
	Publisher Publisher
	// Work reads and takes the commits inside a container of either git
	// mode (package gitserve's Keeper). Every path that removes or
	// replaces a container asks it first (see unreceived.go); nil on an
	// engine that cannot read a container's files, where a remote-mode
	// container's work cannot be checked.
	Work ContainerWork
	// Labels are put on every container and network the Manager creates,
	// next to the org.aimi.* ones, and Recover adopts only containers that
	// carry all of them: two daemons (or parallel test runs) on one engine
	// keep apart this way. Empty for the one daemon of a machine.
	Labels map[string]string
	// Warm is the warm pool starts claim sandboxes from; nil creates every
	// container.
	Warm WarmPool
	// Workspaces keeps repositories' workspace images (package
	// workspace); nil: every sandbox's workspace starts empty.
	Workspaces WorkspaceImages
	// Logger receives the Manager's logs (default slog.Default()).
	Logger *slog.Logger
	// LandAuto lands each container's branch as it completes (Land with
	// that container alone), local git mode.
	LandAuto bool
	// LandVerifyCommand is the verify command of a land's checks and
	// fix-ups (land.verify_command); "": agent.verify_command's.
	LandVerifyCommand string
	// ScoreCommand ranks a task file's qualified attempts (swarm.score_command;
	// "": none) and Variants are the agents its attempts go round
	// (agent.variants): attempts.go.
	ScoreCommand string
	Variants     []AgentVariant
	// PickPause is a test hook: PickPauseBefore or PickPauseAfter holds
	// every pick there (before its state write, or between it and the
	// publish) until the daemon ends, so a test can kill it in between.
	PickPause string
	// LandFixAttempts is how many fix-ups a merge gets before its branch
	// is held (land.fix_attempts); 0: one, negative: none.
	LandFixAttempts int
	// LandHook is called at each step of a land a crash may split
	// (land.Point); nil but in the crash tests, which stop there.
	LandHook land.Hook
	// RadarDir is where the conflict radar writes its merges' trees (one
	// directory per swarm, emptied after every look); "": the system's
	// temporary directory.
	RadarDir string
	// OriginDir is where the daemon keeps its copy of a remote-mode
	// swarm's origin (one bare repository per swarm), which the radar and
	// land work on; "": under RadarDir.
	OriginDir string
	// LandPR opens the pull request of a remote-mode land (the publish
	// token and API); without a token the land says how to open it.
	LandPR publish.Hosted
	// Observer, when set, hears every event, state save and journal record
	// (the daemon's metrics).
	Observer Observer
}

// GitAccess is the daemon's git service for local mode (package gitserve):
// containers clone from and push to it instead of a hosted remote.
// WorkspaceImages keeps each repository's workspace in an image of its
// own, the sandbox image plus its checkout (package workspace): the
// sandboxes of a local-mode swarm are created (or were pooled) from it and
// pay only for what they change.
type WorkspaceImages interface {
	// Image is repo's workspace image built on base (the sandbox image
	// the start would use), if there is a current one, and the commit
	// its workspace is at.
	Image(ctx context.Context, repo, base string) (image, commit string, ok bool)
	// Refresh (re)builds repo's image on base from swarmID's default
	// branch in the background, when it does not hold that tip already.
	Refresh(repo, base, swarmID string)
}

type GitAccess interface {
	// ListenOn makes the service reachable on ip (the swarm network's
	// gateway); idempotent per ip.
	ListenOn(ctx context.Context, ip string) error
	// Prepare makes swarmID's repository from repo ahead of its first
	// Grant: a start asks while it reads the task files, so its first
	// grant does not wait for the copy. Forget removes it again.
	Prepare(ctx context.Context, repo, swarmID string) error
	// Grant gives one container access to its branch of the repository,
	// through gateway (the swarm network's, given to ListenOn) only.
	Grant(ctx context.Context, cb contract.ContainerBranch, gateway string) (Grant, error)
	// Revoke ends a container's access (after it finished). Grants are
	// per swarm: another swarm's container of the same name keeps its own.
	Revoke(sb contract.Sandbox)
	// Unreceived lists commits of the container's branch that neither the
	// service nor the user's checkout has: Cleanup keeps such containers.
	Unreceived(ctx context.Context, cb contract.ContainerBranch) (commits []string, err error)
	// Salvage brings a finished container's branch out of the container
	// itself into the service's repository (its push never arrived) and
	// returns the branch's tip there.
	Salvage(ctx context.Context, sb contract.Sandbox, branch string) (tip string, err error)
	// Forget drops a swarm's repository and grants; Cleanup calls it once
	// none of the swarm's containers is left.
	Forget(ctx context.Context, swarmID string) error
	// OnRefused sets where the service reports the requests of granted
	// containers it refuses: the container and a bounded, printable
	// reason of the service's. New sets it, so that containers adopted
	// after a restart are heard too (their grants outlive the daemon).
	OnRefused(fn func(sb contract.Sandbox, reason string))
}

// ModelAccess is the daemon's model gateway: the model keys stay in the
// daemon, a container gets placeholders bound to it.
type ModelAccess interface {
	// ListenOn makes the gateway reachable on ip (the sandbox network's
	// gateway); idempotent per ip.
	ListenOn(ctx context.Context, ip string) error
	// Grant gives one container its placeholders and base URLs, valid
	// through gateway only.
	Grant(sb contract.Sandbox, gateway string) (ModelGrant, error)
	// Revoke ends a container's placeholders (it ended or was removed).
	Revoke(sb contract.Sandbox)
}

// ModelGrant is what a container needs to reach the model gateway.
type ModelGrant struct {
	Env        map[string]string // placeholders and base URLs: into the container env only
	CAFile     string            // host path of the daemon's CA certificate
	BundleFile string            // host path of the host's roots plus that CA
}

// Publisher moves what a container pushed to the git service to where the
// user sees it (package publish).
type Publisher interface {
	// Publish brings the container's branch into the user's checkout (and
	// opens a pull request when configured); prURL is nil without one.
	Publish(ctx context.Context, cb contract.ContainerBranch) (prURL *string, err error)
	// Published reports whether the container's branch, as the service
	// received it, is in the user's checkout (true when it never pushed):
	// Recover publishes what a daemon that died too early did not.
	Published(ctx context.Context, cb contract.ContainerBranch) (bool, error)
}

// Grant is what a container needs to reach the git service.
type Grant struct {
	RepoURL string // https://<gateway>:<port>/<key>.git
	Token   string // secret: into the container env only
	CAFile  string // host path of the service's CA certificate
	// BranchExists: whether the repository held the container's branch
	// at the grant (nil: unknown); the task-request carries it.
	BranchExists *bool
}
