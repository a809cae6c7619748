package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/contract"
)

// Agent backends.
const (
	AgentACP  = "acp"
	AgentExec = "exec"
	AgentDemo = "demo"
)

// Defaults.
const (
	DefaultStopGrace = 5 * time.Second // with Docker's default 10s stop timeout, leaves time to report
	// DefaultHandshakeTimeout leaves room for an agent that installs or
	// updates itself at start.
	DefaultHandshakeTimeout = 2 * time.Minute
	DefaultAuthorName       = "aimi swarm"
	DefaultAuthorEmail      = "swarm@aimi.invalid"
	DefaultGitUsername      = "x-access-token"
	// DefaultPushRetry is how long the clone and the last push of a run
	// retry while the repository is unreachable: long enough for a daemon restart or a slow
	// start, short against the swarm's timeout.
	DefaultPushRetry = 10 * time.Minute
	// storyPushRetry bounds the retries of the push after each story: the
	// run goes on, and the next push carries the story's commit too.
	storyPushRetry = 15 * time.Second
)

// Config is everything the runner needs besides the task-request.
type Config struct {
	Agent         string   // AgentACP, AgentExec or AgentDemo
	AgentCommand  string   // shell command line (acp, exec)
	DemoCommand   []string // argv that starts the demo agent; default: this executable + "demo-agent"
	AuthMethod    string   // ACP authenticate method id, when the agent needs one
	VerifyCommand string
	Policy        acpclient.Policy
	Workspace     string
	StopGrace     time.Duration
	// HandshakeTimeout bounds each step before the prompt (initialize,
	// authenticate, session/new); 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// StallTimeout and LoopLimit drive the stall watchdog of an ACP
	// agent's turn (0 means DefaultStallTimeout; a negative LoopLimit
	// means DefaultLoopLimit, 0 turns the loop check off).
	StallTimeout time.Duration
	LoopLimit    int
	// LimitRetries is how many times a story whose agent ended its turn
	// in error while the container's model calls were limited is retried
	// after the reset (negative: DefaultLimitRetries; 0: never).
	LimitRetries int
	AuthorName   string
	AuthorEmail  string
	GitToken     string
	GitUsername  string
	// CAFile is the CA bundle the repository's certificate must chain to
	// ("" = the system roots).
	CAFile string
	// AskURL is the container's ask socket on the loopback (from
	// AIMI_NET_FORWARD; "" without one): permission requests go there.
	AskURL string
	// BudgetURL is the container's budget socket on the loopback (from
	// AIMI_NET_FORWARD; "" without one): budget questions go there.
	BudgetURL string
	// DaemonGit says the repository is the daemon's git service
	// (contract.EnvDaemonGit, or from an older daemon GIT_SSL_CAINFO
	// naming the daemon's CA, contract.DaemonCAPath): only
	// then, without a budget socket, are budget questions sent to it.
	DaemonGit bool
	// WorkspaceBase is the commit the image's own workspace is checked
	// out at (contract.EnvWorkspaceBase: a workspace image); "" when the
	// workspace starts empty.
	WorkspaceBase string
	// PushRetry bounds the retries of the run's clone and of its last
	// push while the repository is unreachable (default DefaultPushRetry).
	PushRetry   time.Duration
	SwarmID     string // fallbacks for an unreadable request
	ContainerID string
	// Env is the base environment of agents, verify commands and terminals;
	// nil means os.Environ() without the git token.
	Env    []string
	Logger *slog.Logger
	// Dial is how the runner's own requests (git, permission requests,
	// budgets, the gateway's limits) reach the daemon's services:
	// acp-runner's forward.Channels, past the share of each channel the
	// agent's processes may hold; nil dials every address as it is.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// onAgentStart, when set, is told each agent process id (tests use it to
	// check that the process group is gone after a stop).
	onAgentStart func(pid int)
}

// ConfigFromEnv reads the Config from environment lookups (os.Getenv in
// production).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Agent:         strings.TrimSpace(getenv(contract.EnvAgent)),
		AgentCommand:  strings.TrimSpace(getenv(contract.EnvAgentCommand)),
		AuthMethod:    strings.TrimSpace(getenv(contract.EnvAgentAuthMethod)),
		VerifyCommand: strings.TrimSpace(getenv(contract.EnvVerifyCommand)),
		Workspace:     getenv(contract.EnvWorkspace),
		AuthorName:    getenv(contract.EnvGitAuthorName),
		AuthorEmail:   getenv(contract.EnvGitAuthorEmail),
		GitToken:      getenv(contract.EnvGitToken),
		GitUsername:   getenv(contract.EnvGitUsername),
		SwarmID:       getenv(contract.EnvSwarmID),
		ContainerID:   getenv(contract.EnvContainerID),
		CAFile:        getenv(contract.EnvGitSSLCAInfo),
		AskURL:        socketURLOf(getenv(contract.EnvNetForward), contract.AskSocket, contract.AskPath),
		BudgetURL:     socketURLOf(getenv(contract.EnvNetForward), contract.BudgetSocket, contract.BudgetPath),
		DaemonGit:     getenv(contract.EnvDaemonGit) == "1" || getenv(contract.EnvGitSSLCAInfo) == contract.DaemonCAPath,
		WorkspaceBase: getenv(contract.EnvWorkspaceBase),
		StopGrace:     DefaultStopGrace,
		LoopLimit:     -1,
		LimitRetries:  -1,
	}
	if c.Agent == "" {
		c.Agent = AgentDemo
		if c.AgentCommand != "" {
			c.Agent = AgentACP
		}
	}
	switch c.Agent {
	case AgentDemo:
	case AgentACP, AgentExec:
		if c.AgentCommand == "" {
			return c, fmt.Errorf("%s=%s needs %s (the agent's command line)", contract.EnvAgent, c.Agent, contract.EnvAgentCommand)
		}
	default:
		return c, fmt.Errorf("%s=%q: use acp, exec or demo", contract.EnvAgent, c.Agent)
	}
	p, err := acpclient.ParsePolicy(getenv(contract.EnvPermissionPolicy))
	if err != nil {
		return c, fmt.Errorf("%s: %w", contract.EnvPermissionPolicy, err)
	}
	c.Policy = p
	if s := strings.TrimSpace(getenv(contract.EnvStopGrace)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q: want a duration like 10s", contract.EnvStopGrace, s)
		}
		c.StopGrace = d
	}
	if s := strings.TrimSpace(getenv(contract.EnvHandshakeTimeout)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration like 2m", contract.EnvHandshakeTimeout, s)
		}
		c.HandshakeTimeout = d
	}
	if err := c.watchdogFromEnv(getenv); err != nil {
		return c, err
	}
	if err := c.limitRetriesFromEnv(getenv); err != nil {
		return c, err
	}
	if s := strings.TrimSpace(getenv(contract.EnvPushRetry)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q: want a duration like 10m", contract.EnvPushRetry, s)
		}
		c.PushRetry = d
	}
	return c, nil
}

func (c *Config) setDefaults() {
	if c.Workspace == "" {
		c.Workspace = contract.DefaultWorkspace
	}
	if c.AuthorName == "" {
		c.AuthorName = DefaultAuthorName
	}
	if c.AuthorEmail == "" {
		c.AuthorEmail = DefaultAuthorEmail
	}
	if c.GitUsername == "" {
		c.GitUsername = DefaultGitUsername
	}
	if c.Agent == "" {
		c.Agent = AgentDemo
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.LoopLimit < 0 {
		c.LoopLimit = DefaultLoopLimit
	}
	if c.LimitRetries < 0 {
		c.LimitRetries = DefaultLimitRetries
	}
	if c.PushRetry == 0 {
		c.PushRetry = DefaultPushRetry
	}
	if c.CAFile == "" {
		for _, kv := range c.Env {
			if v, ok := strings.CutPrefix(kv, contract.EnvGitSSLCAInfo+"="); ok {
				c.CAFile = v
			}
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if c.Env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, contract.EnvGitToken+"=") {
				c.Env = append(c.Env, kv)
			}
		}
	}
	if len(c.DemoCommand) == 0 {
		if exe, err := os.Executable(); err == nil {
			c.DemoCommand = []string{exe, "demo-agent"}
		}
	}
}
