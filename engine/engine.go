package engine

import (
	"context"
	"time"

	"github.com/aimi-tools/swarm/internal/logcursor"
)

// Engine is the part of a container engine the orchestrator drives;
// *container.Docker (one engine) and *swarmmode.Engine (a Docker Swarm mode
// cluster) satisfy it. What only some engines can do is in optional.go.
type Engine interface {
	EnsureNetwork(ctx context.Context, name string, labels map[string]string) (NetworkInfo, error)
	RemoveNetworkIfUnused(ctx context.Context, name string) error
	Create(ctx context.Context, s Spec) (id string, err error)
	Start(ctx context.Context, id string) error
	// Wait must be called before Start; the channel yields one Exit:
	// the container's exit (at once if it has already exited), or
	// ErrNotFound once it is removed.
	Wait(ctx context.Context, id string) <-chan Exit
	WriteStdin(ctx context.Context, id string, line []byte) error
	// Lines yields the lines strictly after the cursor; closed at the end.
	Lines(ctx context.Context, id string, after logcursor.Position, follow bool) (<-chan Line, error)
	Inspect(ctx context.Context, id string) (Info, error)
	Stop(ctx context.Context, id string, grace time.Duration) error
	Remove(ctx context.Context, id string) error
	List(ctx context.Context, labels map[string]string) ([]Info, error)
}
