package contract

// Environment variables of acp-runner. The daemon sets them on the
// container; cmd/acp-runner's doc says what each one means.
const (
	EnvAgent            = "AIMI_AGENT"             // acp | exec | demo
	EnvAgentCommand     = "AIMI_AGENT_COMMAND"     // command line of the ACP agent or of the exec command
	EnvAgentAuthMethod  = "AIMI_AGENT_AUTH_METHOD" // optional ACP auth method id to authenticate with after initialize
	EnvVerifyCommand    = "AIMI_VERIFY_COMMAND"    // optional shell command run after every story
	EnvPermissionPolicy = "AIMI_PERMISSION_POLICY" // allow | reject | allow-kinds:read,edit,...
	EnvWorkspace        = "AIMI_WORKSPACE"         // clone target, default DefaultWorkspace
	EnvStopGrace        = "AIMI_STOP_GRACE"        // Go duration, default 5s
	// EnvHandshakeTimeout bounds each of initialize, authenticate and
	// session/new (Go duration, default 2m); the daemon sets it from
	// agent.handshake_timeout.
	EnvHandshakeTimeout = "AIMI_AGENT_HANDSHAKE_TIMEOUT"
	// EnvStallTimeout and EnvLoopLimit configure the runner's stall
	// watchdog (agent.stall_timeout, a Go duration; agent.loop_limit, a
	// whole number, 0 = off).
	EnvStallTimeout = "AIMI_AGENT_STALL_TIMEOUT"
	EnvLoopLimit    = "AIMI_AGENT_LOOP_LIMIT"
	// EnvLimitRetries is how many times the runner retries a story whose
	// agent ended its turn in error while its container's model calls
	// were limited (agent.limit_retries, a whole number, default 5).
	EnvLimitRetries   = "AIMI_AGENT_LIMIT_RETRIES"
	EnvGitAuthorName  = "AIMI_GIT_AUTHOR_NAME"  // default "aimi swarm"
	EnvGitAuthorEmail = "AIMI_GIT_AUTHOR_EMAIL" // default "swarm@aimi.invalid"
	EnvGitToken       = "AIMI_GIT_TOKEN"        // optional https token; never logged nor passed to agents
	EnvGitUsername    = "AIMI_GIT_USERNAME"     // user for the token's Basic auth, default x-access-token
	EnvSwarmID        = "AIMI_SWARM_ID"         // fallback envelope ids when the request is unreadable
	EnvContainerID    = "AIMI_CONTAINER_ID"
	EnvLogLevel       = "AIMI_LOG_LEVEL" // debug | info | warn | error
	// EnvGitSSLCAInfo is git's name for the CA bundle of the daemon's git
	// service in local mode; the runner's relay reads it (not SSL_CERT_FILE,
	// which would change what the agent trusts too).
	EnvGitSSLCAInfo = "GIT_SSL_CAINFO"
	// EnvDaemonGit ("1") says the repository is the daemon's own git
	// service (local git mode): the runner may then ask it for a
	// ready-made workspace and, without sockets, ask it about budgets. A
	// claimed warm sandbox's EnvGitSSLCAInfo names a copy of the CA, not
	// DaemonCAPath, so the path alone cannot say so.
	EnvDaemonGit = "AIMI_DAEMON_GIT"
	// The trust-store variables a sandbox gets with the model gateway:
	// Node adds EnvNodeExtraCACerts (the daemon's CA) to its roots;
	// OpenSSL, Go and curl (EnvSSLCertFile) and Python's requests
	// (EnvRequestsCABundle) replace theirs with a bundle of the host's
	// roots plus that CA.
	EnvNodeExtraCACerts = "NODE_EXTRA_CA_CERTS"
	EnvSSLCertFile      = "SSL_CERT_FILE"
	EnvRequestsCABundle = "REQUESTS_CA_BUNDLE"
	// EnvPushRetry is the Go duration the runner's clone and last push
	// retry while the repository is unreachable (default 10m).
	EnvPushRetry = "AIMI_PUSH_RETRY"
	// EnvTaskRequestFile names a file holding the task-request line, read
	// instead of stdin (engines that cannot give a task stdin: Swarm mode).
	EnvTaskRequestFile = "AIMI_TASK_REQUEST_FILE"
	// EnvSecretEnv lists (comma-separated) environment names whose values
	// are files of that name in SecretDir; acp-runner sets them in its own
	// environment before anything reads it (Swarm mode secrets).
	EnvSecretEnv = "AIMI_SECRET_ENV"
	// EnvRunAs is the user (a name or uid[:gid], as in an image's USER)
	// acp-runner becomes once it has read SecretDir, when it starts as
	// root: the secret files are root's, mode 0400, so the agent, which
	// runs as that user, cannot read them (Swarm mode).
	EnvRunAs = "AIMI_RUN_AS"
	// EnvWarm set to "1" starts acp-runner as a warm-pool sandbox: before
	// anything else it reads one claim line (WarmClaim) from stdin, which
	// carries the environment the daemon would have given a created
	// container (secrets and git token included), then the task-request.
	EnvWarm = "AIMI_WARM"
)

// SecretDir is where EnvSecretEnv's files are: Swarm mode mounts a
// service's secrets there.
const SecretDir = "/run/secrets"

// DefaultWorkspace is where acp-runner clones the repository inside the
// container when EnvWorkspace is unset.
const DefaultWorkspace = "/workspace"

// The sandbox's way out (package egress): a sandbox has no network of its
// own; the daemon's services are unix sockets in NetDir, and the runner
// serves each on a loopback port.
const (
	// EnvNetForward lists PORT=NAME pairs, comma-separated: the runner
	// listens on 127.0.0.1:PORT and forwards each connection to
	// NetDir/NAME.sock.
	EnvNetForward = "AIMI_NET_FORWARD"
	// NetDir is where the container's socket directory is mounted.
	NetDir = "/run/aimi/net"
	// ProxyPort is the loopback port of the egress proxy in a sandbox.
	ProxyPort = 3128
)

// Docker Swarm mode's way out: a sandbox's only network is an internal
// overlay of its own, whose one other member is its relay (acp-runner
// net-relay). The runner forwards its loopback ports to the relay, which
// forwards each connection to the daemon's door, naming the sandbox.
const (
	// EnvNetRelay is the host the runner dials (TCP, at each forward's
	// port) instead of NetDir's sockets.
	EnvNetRelay = "AIMI_NET_RELAY"
	// NetRelayHost is the relay's name on the sandbox's overlay.
	NetRelayHost = "aimi-net"
	// EnvNetDoor is the relay's: the daemon's door, HOST:PORT (TLS).
	EnvNetDoor = "AIMI_NET_DOOR"
	// EnvNetSubnet is the relay's: the sandbox's overlay (CIDR), the
	// only address the relay listens on.
	EnvNetSubnet = "AIMI_NET_SUBNET"
	// NetKeyFile is the relay's credential at the door (a Swarm secret).
	NetKeyFile = "/run/secrets/aimi-net-key"
	// NetCAFile is the daemon's CA certificate in the relay.
	NetCAFile = "/run/aimi/net-ca.pem"
	// NetDoorHello starts the line a relay sends the door on each
	// connection: "AIMI-NET/1 SERVICE KEY\n", then the service's bytes.
	NetDoorHello = "AIMI-NET/1"
)
