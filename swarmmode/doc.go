// Package swarmmode runs aimi's sandboxes on a Docker Swarm mode cluster:
// the same operations the orchestrator asks of the single Docker engine
// (create, start, deliver the task-request, lines after a cursor, wait,
// stop, inspect, list by label, remove), done with Swarm mode services
// through a manager's Engine API. Swarm mode does the placement, the
// secrets, the overlay networks and the log collection; this package only
// translates.
//
// One sandbox is one service in replicated-job mode (one task, no
// restart), named after the container, the daemon instance and the swarm
// (ServiceName: daemons sharing a cluster never share a name), and
// labelled with its org.aimi.* labels on the service and on the task's
// container. Its id is a hash of the service name, known before the
// service exists. Every config, secret and network of a sandbox carries
// its instance, swarm and container labels and a name derived from its
// service; nothing is listed, stopped or removed without both matching,
// and a failed create takes back only the objects it made, by id. Every
// engine call has a deadline (Options.CallTimeout). Because a task cannot be
// given stdin and its files must exist before it is scheduled, the service
// is created only when the task-request is delivered (WriteStdin): Create
// stores the sandbox's spec as a Swarm config (no secret in it) and every
// environment value as a Swarm secret, Start marks nothing, and WriteStdin
// stores the request line as a config mounted read-only in the container
// and creates the service. The runner reads the request from that file and
// its environment from /run/secrets (contract.EnvTaskRequestFile,
// contract.EnvSecretEnv), so no value appears in the service spec.
//
// Output comes from the service's logs with timestamps (the same
// multiplexed format as a container's, so internal/enginelog reads it
// from a cursor); the exit from the task's state and exit code. A task
// whose node went down or that was orphaned ends with CodeNodeLost. One
// its node could not start (rejected, or failed before its program ran)
// did no work, and the restart policy (none: a runner that ran is never
// run twice) does not start it again, so the engine does: a forced update
// starts a new iteration of the job, a bounded number of times, never
// after a stop (retry.go); then it ends with engine.CodeStartFailed. The
// sandbox's own task is the newest iteration's. Stop updates
// the service so that its running task is shut down (SIGTERM, the stop
// grace, SIGKILL) while its logs and exit code stay readable; a sandbox
// stopped before its request was delivered gets a "stopped" config
// instead, so it reads as exited and is never started. Remove takes the
// service, its configs, secrets and network away.
//
// Each sandbox gets its own overlay network, so sandboxes cannot reach
// each other. A spec with a Relay (engine.Spec.Relay) makes that network
// internal, with no route off it, and adds the sandbox's relay service
// (relay.go): the way to the daemon's door, holding the key the sandbox
// never sees; Remove takes it too. What Swarm mode on engine 20.10 cannot do (swap limits,
// no-new-privileges, a runtime choice) is listed in docs/swarm-mode.md.
package swarmmode
