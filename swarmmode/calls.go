package swarmmode

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// timedClient gives every engine call this package makes its own deadline,
// so that a manager that accepts a request and never answers cannot hold a
// stop, a cleanup or the daemon's view of a sandbox. Log streams (TaskLogs)
// are not wrapped: they are read as long as the caller's context says.
type timedClient struct {
	client.APIClient
	d time.Duration
}

func (c timedClient) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.d)
}

func (c timedClient) Info(ctx context.Context) (system.Info, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.Info(ctx)
}

func (c timedClient) ConfigInspectWithRaw(ctx context.Context, id string) (swarm.Config, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ConfigInspectWithRaw(ctx, id)
}

func (c timedClient) ConfigCreate(ctx context.Context, s swarm.ConfigSpec) (swarm.ConfigCreateResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ConfigCreate(ctx, s)
}

func (c timedClient) ConfigRemove(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ConfigRemove(ctx, id)
}

func (c timedClient) ConfigList(ctx context.Context, o swarm.ConfigListOptions) ([]swarm.Config, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ConfigList(ctx, o)
}

func (c timedClient) SecretCreate(ctx context.Context, s swarm.SecretSpec) (swarm.SecretCreateResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.SecretCreate(ctx, s)
}

func (c timedClient) SecretRemove(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.SecretRemove(ctx, id)
}

func (c timedClient) SecretList(ctx context.Context, o swarm.SecretListOptions) ([]swarm.Secret, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.SecretList(ctx, o)
}

func (c timedClient) SecretInspectWithRaw(ctx context.Context, id string) (swarm.Secret, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.SecretInspectWithRaw(ctx, id)
}

func (c timedClient) ServiceCreate(ctx context.Context, s swarm.ServiceSpec, o swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceCreate(ctx, s, o)
}

func (c timedClient) ServiceInspectWithRaw(ctx context.Context, id string, o swarm.ServiceInspectOptions) (swarm.Service, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceInspectWithRaw(ctx, id, o)
}

func (c timedClient) ServiceList(ctx context.Context, o swarm.ServiceListOptions) ([]swarm.Service, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceList(ctx, o)
}

func (c timedClient) ServiceRemove(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceRemove(ctx, id)
}

func (c timedClient) ServiceUpdate(ctx context.Context, id string, v swarm.Version, s swarm.ServiceSpec, o swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceUpdate(ctx, id, v, s, o)
}

func (c timedClient) TaskList(ctx context.Context, o swarm.TaskListOptions) ([]swarm.Task, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.TaskList(ctx, o)
}

func (c timedClient) TaskInspectWithRaw(ctx context.Context, id string) (swarm.Task, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.TaskInspectWithRaw(ctx, id)
}

func (c timedClient) NodeInspectWithRaw(ctx context.Context, id string) (swarm.Node, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.NodeInspectWithRaw(ctx, id)
}

func (c timedClient) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.NetworkCreate(ctx, name, o)
}

func (c timedClient) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.NetworkList(ctx, o)
}

func (c timedClient) NetworkRemove(ctx context.Context, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.NetworkRemove(ctx, id)
}

func (c timedClient) ImageInspect(ctx context.Context, id string, o ...client.ImageInspectOption) (image.InspectResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ImageInspect(ctx, id, o...)
}
