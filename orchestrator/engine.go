package orchestrator

import (
	"context"
	"time"

	"github.com/aimi-tools/swarm/container"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// Engine is the part of the container layer the orchestrator drives;
// *container.Docker (one engine) and *swarmmode.Engine (a Docker Swarm mode
// cluster) satisfy it, and docs/kubernetes.md maps it onto Kubernetes. The
// orchestrator never learns which engine it talks to (docs/design.md, Scale).
type Engine interface {
	EnsureNetwork(ctx context.Context, name string, labels map[string]string) (container.NetworkInfo, error)
	RemoveNetworkIfUnused(ctx context.Context, name string) error
	Create(ctx context.Context, s container.Spec) (id string, err error)
	Start(ctx context.Context, id string) error
	// Wait must be called before Start; the channel yields one Exit.
	Wait(ctx context.Context, id string) <-chan container.Exit
	WriteStdin(ctx context.Context, id string, line []byte) error
	// Lines yields the lines strictly after the cursor; closed at the end.
	Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan container.Line, error)
	Inspect(ctx context.Context, id string) (container.Info, error)
	Stop(ctx context.Context, id string, grace time.Duration) error
	Remove(ctx context.Context, id string) error
	List(ctx context.Context, labels map[string]string) ([]container.Info, error)
}

var _ Engine = (*container.Docker)(nil)
