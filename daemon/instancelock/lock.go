package instancelock

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/termsafe"
)

// Names and label keys on the engine: one place for them.
const (
	// Image is the empty image markers are created from.
	Image = "aimi-instance-lock:1"
	// NamePrefix starts every marker container's name.
	NamePrefix = "aimid-instance-"
	// LabelInstance holds the instance name on a marker.
	LabelInstance = contract.LabelInstanceLock

	labelPID       = contract.LabelInstanceLockPID
	labelSocket    = contract.LabelInstanceLockSocket
	labelDataDir   = contract.LabelInstanceLockDataDir
	labelHost      = contract.LabelInstanceLockHost
	labelStarted   = contract.LabelInstanceLockStarted
	labelBootID    = contract.LabelInstanceLockBootID
	labelPIDNS     = contract.LabelInstanceLockPIDNS
	labelPIDStart  = contract.LabelInstanceLockPIDStart
	labelContainer = contract.LabelInstanceLockContainer
)

// takeAttempts bounds the create / find a stale marker / remove loop; each
// round only repeats when another daemon moved at the same moment.
const takeAttempts = 5

// Engine is what the lock needs of the Docker Engine API
// (client.APIClient satisfies it).
type Engine interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, opts image.ImportOptions) (io.ReadCloser, error)
	ContainerCreate(ctx context.Context, cfg *container.Config, host *container.HostConfig, net *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error
	DaemonHost() string
}

// Owner is a daemon holding an instance, as its marker records it.
type Owner struct {
	Instance string
	PID      int
	Socket   string
	DataDir  string
	Host     string
	Started  time.Time
	// Liveness: the same boot and pid namespace make PID checkable, and
	// PIDStart (the process's start time in clock ticks since boot) tells
	// it from a later process that got the same pid.
	BootID   string
	PIDNS    string
	PIDStart string
	// Container is the id of the engine container the daemon runs in
	// (compose), when it runs in one: a daemon in another pid namespace
	// is checked through it.
	Container string
}

// Self describes this process as the owner of instance.
func Self(instance, socket, dataDir string) Owner {
	host, _ := os.Hostname()
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	pidNS, _ := os.Readlink("/proc/self/ns/pid")
	start, _ := procStart(os.Getpid())
	return Owner{
		Instance: instance, PID: os.Getpid(), Socket: socket, DataDir: dataDir, Host: host,
		Started: time.Now().UTC().Truncate(time.Second), BootID: strings.TrimSpace(string(bootID)), PIDNS: pidNS, PIDStart: start,
		Container: ownContainer(),
	}
}

func (o Owner) labels() map[string]string {
	return map[string]string{
		LabelInstance: o.Instance, labelPID: strconv.Itoa(o.PID), labelSocket: o.Socket, labelDataDir: o.DataDir,
		labelHost: o.Host, labelStarted: o.Started.Format(time.RFC3339), labelBootID: o.BootID, labelPIDNS: o.PIDNS, labelPIDStart: o.PIDStart,
		labelContainer: o.Container,
	}
}

func ownerFrom(l map[string]string) Owner {
	pid, _ := strconv.Atoi(l[labelPID])
	started, _ := time.Parse(time.RFC3339, l[labelStarted])
	return Owner{
		Instance: l[LabelInstance], PID: pid, Socket: l[labelSocket], DataDir: l[labelDataDir], Host: l[labelHost],
		Started: started, BootID: l[labelBootID], PIDNS: l[labelPIDNS], PIDStart: l[labelPIDStart],
		Container: l[labelContainer],
	}
}

// ErrHeld: another daemon of the instance holds it on this engine.
var ErrHeld = errors.New("another aimid of this instance runs on this engine")

// HeldError names the daemon holding the instance.
type HeldError struct {
	Owner  Owner
	Marker string // the marker container's name
	// Unchecked: the owner runs on another host or in another pid
	// namespace, so whether it still runs could not be checked.
	Unchecked bool
}

func (e *HeldError) Error() string {
	// Any client of the engine can write a marker's labels: they reach a
	// terminal only bounded and without control characters.
	o := e.Owner
	s := fmt.Sprintf("another aimid of instance %q runs on this engine: pid %d on host %s, socket %s, data dir %s, since %s",
		clean(o.Instance), o.PID, clean(o.Host), clean(o.Socket), clean(o.DataDir), o.Started.Format(time.RFC3339))
	if e.Unchecked {
		s += fmt.Sprintf(" (on another host or pid namespace, so whether it still runs cannot be checked from here; if it is gone, remove its marker with 'docker rm -f %s')", clean(e.Marker))
	}
	return s + "; two daemons of one instance would supervise the same swarms: stop that one first, or give this one another --instance (it then adopts only swarms it starts)"
}

// Unwrap makes errors.Is(err, ErrHeld) hold.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Lock is a held instance.
type Lock struct {
	eng Engine
	id  string
	log *slog.Logger
}

// MarkerName is the marker container's name for instance.
func MarkerName(instance string) string { return NamePrefix + instance }

// Acquire takes self.Instance on the engine, or returns a *HeldError
// naming the live owner. extra labels go on the marker too (tests label
// what they create).
func Acquire(ctx context.Context, eng Engine, self Owner, extra map[string]string, log *slog.Logger) (*Lock, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := ensureImage(ctx, eng); err != nil {
		return nil, err
	}
	name := MarkerName(self.Instance)
	labels := maps.Clone(extra)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, self.labels())
	for range takeAttempts {
		created, err := eng.ContainerCreate(ctx, &container.Config{Image: Image, Cmd: []string{"/aimid-instance-lock"}, Labels: labels},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		if err == nil {
			return &Lock{eng: eng, id: created.ID, log: log}, nil
		}
		if !errdefs.IsConflict(err) {
			return nil, fmt.Errorf("create the instance marker %s on the engine: %w", name, err)
		}
		insp, err := eng.ContainerInspect(ctx, name)
		if errdefs.IsNotFound(err) {
			continue // its owner just removed it
		}
		if err != nil {
			return nil, fmt.Errorf("inspect the instance marker %s: %w", name, err)
		}
		var l map[string]string
		if insp.Config != nil {
			l = insp.Config.Labels
		}
		owner := ownerFrom(l)
		switch liveness(ctx, eng, self, owner) {
		case live:
			return nil, &HeldError{Owner: owner, Marker: name}
		case unknown:
			return nil, &HeldError{Owner: owner, Marker: name, Unchecked: true}
		}
		log.Warn("removing the instance marker of a daemon that is gone", "marker", name, "pid", owner.PID, "socket", owner.Socket, "dataDir", owner.DataDir)
		// By id: a successor that took the name meanwhile keeps its marker.
		if err := eng.ContainerRemove(ctx, insp.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("remove the stale instance marker %s: %w", name, err)
		}
	}
	return nil, fmt.Errorf("take instance %q: its marker %s kept changing hands; another daemon of the instance is starting, try again", self.Instance, name)
}

// Release removes the marker: the instance is free for the next daemon.
func (l *Lock) Release(ctx context.Context) error {
	if err := l.eng.ContainerRemove(ctx, l.id, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove the instance marker: %w", err)
	}
	return nil
}

// ensureImage imports the empty marker image when the engine lacks it.
func ensureImage(ctx context.Context, eng Engine) error {
	if _, err := eng.ImageInspect(ctx, Image); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("inspect %s: %w", Image, err)
	}
	var empty bytes.Buffer
	if err := tar.NewWriter(&empty).Close(); err != nil {
		return err
	}
	rc, err := eng.ImageImport(ctx, image.ImportSource{Source: &empty, SourceName: "-"}, Image, image.ImportOptions{
		Changes: []string{`LABEL ` + contract.LabelInstanceLockImage + `=1`},
		Message: "aimid instance marker: an empty image, never run",
	})
	if err != nil {
		return fmt.Errorf("import the instance marker image %s: %w", Image, err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("import the instance marker image %s: %w", Image, err)
	}
	return nil
}

// clean makes a marker's text (another daemon wrote it) fit for one line
// of an error: bounded, control characters dropped (termsafe.Line).
func clean(s string) string { return termsafe.Line(s, 512) }
