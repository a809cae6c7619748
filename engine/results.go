package engine

import (
	"fmt"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// Exit is how a container ended.
type Exit struct {
	Code      int
	OOMKilled bool
	Err       error // the wait itself failed (ctx done, container removed)
	// Failure is the error code (CodeStartFailed, or a backend's own such
	// as swarmmode.CodeNodeLost) of a sandbox the engine ended from
	// outside its process, with the reason; empty for an ordinary exit.
	// Optional: the single Docker engine never sets it.
	Failure, FailureReason string
}

// Info is what Inspect and List report about a container.
type Info struct {
	ID, Name, Image string // Name without the engine's leading "/"
	ImageID         string // the image's id at create (Image may have moved since)
	Labels          map[string]string
	Status          string // created, running, paused, restarting, removing, exited, dead
	Running         bool
	ExitCode        int
	OOMKilled       bool
	Error           string // the engine's error for the last start/exit, if any
	// Failure and FailureReason: as in Exit, once the sandbox ended.
	Failure, FailureReason string
	// Node is the cluster node the sandbox runs on. Optional: only an
	// engine that places sandboxes on several nodes (Swarm mode) sets it;
	// "" on a single engine.
	Node       string
	Pid        int
	StartedAt  time.Time // zero if never started
	FinishedAt time.Time // zero if never finished

	// What the container was created with, for verification.
	NanoCPUs, MemoryBytes, MemorySwapBytes, PidsLimit int64
	ReadOnlyRootfs                                    bool
	Runtime                                           string
	SecurityOpt, CapAdd, CapDrop                      []string // capabilities without the CAP_ prefix
	LogDriver                                         string
	NetworkMode                                       string
	Networks                                          map[string]string // network name -> IPv4 address
	User                                              string
}

// NetworkInfo describes a network EnsureNetwork made or found.
type NetworkInfo struct {
	ID, Name, Gateway, Subnet string
	Labels                    map[string]string
}

// Event is a container ending ("die") or hitting its memory limit ("oom").
type Event struct {
	ContainerID string
	Name        string // container name, without the leading "/"
	Action      string // "die" or "oom"
	ExitCode    int    // for "die"
	Time        time.Time
	Labels      map[string]string // the container's labels
}

// MaxLineBytes caps one output line (newline excluded): the swarm message
// spec's NDJSON line limit. Longer lines are reported with ErrLineTooLong
// and skipped.
const MaxLineBytes = acpmsg.MaxLineBytes

// Stream says which output stream a line came from.
type Stream int

// The engine's stream ids in multiplexed frames (stdcopy.Stdout/Stderr).
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// Line is one line of a container's output, or a problem with one.
//
// A line with Err == ErrLineTooLong (errors.Is) has a valid Cursor, Stream and
// Size but no Data: it was too long and was skipped. A Line with a zero
// Cursor and a non-nil Err is a failure of the stream itself; it is the last
// value before the channel closes.
type Line struct {
	Cursor logcursor.Cursor
	Stream Stream
	Data   []byte // without the newline; owned by the receiver
	Size   int    // length of the full line in bytes (newline excluded)
	Err    error
}
