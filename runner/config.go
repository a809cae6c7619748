package runner

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
)

// Environment variables of acp-runner; cmd/acp-runner's doc lists them for
// the daemon, which sets them on the container.
const (
	EnvAgent            = "AIMI_AGENT"             // acp | exec | demo
	EnvAgentCommand     = "AIMI_AGENT_COMMAND"     // command line of the ACP agent or of the exec command
	EnvAgentAuthMethod  = "AIMI_AGENT_AUTH_METHOD" // optional ACP auth method id to authenticate with after initialize
	EnvVerifyCommand    = "AIMI_VERIFY_COMMAND"    // optional shell command run after every story
	EnvPermissionPolicy = "AIMI_PERMISSION_POLICY" // allow | reject | allow-kinds:read,edit,...
	EnvWorkspace        = "AIMI_WORKSPACE"         // clone target, default /workspace
	EnvStopGrace        = "AIMI_STOP_GRACE"        // Go duration, default 5s
	// EnvHandshakeTimeout bounds each of initialize, authenticate and
	// session/new (Go duration, default 2m); the daemon sets it from
	// agent.handshake_timeout.
	EnvHandshakeTimeout = "AIMI_AGENT_HANDSHAKE_TIMEOUT"
	EnvGitAuthorName    = "AIMI_GIT_AUTHOR_NAME"  // default "aimi swarm"
	EnvGitAuthorEmail   = "AIMI_GIT_AUTHOR_EMAIL" // default "swarm@aimi.invalid"
	EnvGitToken         = "AIMI_GIT_TOKEN"        // optional https token; never logged nor passed to agents
	EnvGitUsername      = "AIMI_GIT_USERNAME"     // user for the token's Basic auth, default x-access-token
	EnvSwarmID          = "AIMI_SWARM_ID"         // fallback envelope ids when the request is unreadable
	EnvContainerID      = "AIMI_CONTAINER_ID"
	EnvLogLevel         = "AIMI_LOG_LEVEL" // debug | info | warn | error
)

// Agent backends.
const (
	AgentACP  = "acp"
	AgentExec = "exec"
	AgentDemo = "demo"
)

// Defaults.
const (
	DefaultWorkspace = "/workspace"
	DefaultStopGrace = 5 * time.Second // with Docker's default 10s stop timeout, leaves time to report
	// DefaultHandshakeTimeout leaves room for an agent that installs or
	// updates itself at start.
	DefaultHandshakeTimeout = 2 * time.Minute
	DefaultAuthorName       = "aimi swarm"
	DefaultAuthorEmail      = "swarm@aimi.invalid"
	DefaultGitUsername      = "x-access-token"
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
	AuthorName       string
	AuthorEmail      string
	GitToken         string
	GitUsername      string
	SwarmID          string // fallbacks for an unreadable request
	ContainerID      string
	// Env is the base environment of agents, verify commands and terminals;
	// nil means os.Environ() without the git token.
	Env    []string
	Logger *slog.Logger

	// onAgentStart, when set, is told each agent process id (tests use it to
	// check that the process group is gone after a stop).
	onAgentStart func(pid int)
}

// ConfigFromEnv reads the Config from environment lookups (os.Getenv in
// production).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Agent:         strings.TrimSpace(getenv(EnvAgent)),
		AgentCommand:  strings.TrimSpace(getenv(EnvAgentCommand)),
		AuthMethod:    strings.TrimSpace(getenv(EnvAgentAuthMethod)),
		VerifyCommand: strings.TrimSpace(getenv(EnvVerifyCommand)),
		Workspace:     getenv(EnvWorkspace),
		AuthorName:    getenv(EnvGitAuthorName),
		AuthorEmail:   getenv(EnvGitAuthorEmail),
		GitToken:      getenv(EnvGitToken),
		GitUsername:   getenv(EnvGitUsername),
		SwarmID:       getenv(EnvSwarmID),
		ContainerID:   getenv(EnvContainerID),
		StopGrace:     DefaultStopGrace,
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
			return c, fmt.Errorf("%s=%s needs %s (the agent's command line)", EnvAgent, c.Agent, EnvAgentCommand)
		}
	default:
		return c, fmt.Errorf("%s=%q: use acp, exec or demo", EnvAgent, c.Agent)
	}
	p, err := acpclient.ParsePolicy(getenv(EnvPermissionPolicy))
	if err != nil {
		return c, fmt.Errorf("%s: %w", EnvPermissionPolicy, err)
	}
	c.Policy = p
	if s := strings.TrimSpace(getenv(EnvStopGrace)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q: want a duration like 10s", EnvStopGrace, s)
		}
		c.StopGrace = d
	}
	if s := strings.TrimSpace(getenv(EnvHandshakeTimeout)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration like 2m", EnvHandshakeTimeout, s)
		}
		c.HandshakeTimeout = d
	}
	return c, nil
}

func (c *Config) setDefaults() {
	if c.Workspace == "" {
		c.Workspace = DefaultWorkspace
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, EnvGitToken+"=") {
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
