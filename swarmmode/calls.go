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

// The calls by their shapes: each runs the client's method under c's
// deadline.

func call0[T any](c timedClient, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return f(ctx)
}

func call1[A, T any](c timedClient, ctx context.Context, f func(context.Context, A) (T, error), a A) (T, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return f(ctx, a)
}

func call2[A, B, T any](c timedClient, ctx context.Context, f func(context.Context, A, B) (T, error), a A, b B) (T, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return f(ctx, a, b)
}

func callErr(c timedClient, ctx context.Context, f func(context.Context, string) error, id string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return f(ctx, id)
}

func callRaw[T any](c timedClient, ctx context.Context, f func(context.Context, string) (T, []byte, error), id string) (T, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return f(ctx, id)
}

func (c timedClient) Info(ctx context.Context) (system.Info, error) {
	return call0(c, ctx, c.APIClient.Info)
}

func (c timedClient) ConfigInspectWithRaw(ctx context.Context, id string) (swarm.Config, []byte, error) {
	return callRaw(c, ctx, c.APIClient.ConfigInspectWithRaw, id)
}

func (c timedClient) ConfigCreate(ctx context.Context, s swarm.ConfigSpec) (swarm.ConfigCreateResponse, error) {
	return call1(c, ctx, c.APIClient.ConfigCreate, s)
}

func (c timedClient) ConfigRemove(ctx context.Context, id string) error {
	return callErr(c, ctx, c.APIClient.ConfigRemove, id)
}

func (c timedClient) ConfigList(ctx context.Context, o swarm.ConfigListOptions) ([]swarm.Config, error) {
	return call1(c, ctx, c.APIClient.ConfigList, o)
}

func (c timedClient) SecretCreate(ctx context.Context, s swarm.SecretSpec) (swarm.SecretCreateResponse, error) {
	return call1(c, ctx, c.APIClient.SecretCreate, s)
}

func (c timedClient) SecretRemove(ctx context.Context, id string) error {
	return callErr(c, ctx, c.APIClient.SecretRemove, id)
}

func (c timedClient) SecretList(ctx context.Context, o swarm.SecretListOptions) ([]swarm.Secret, error) {
	return call1(c, ctx, c.APIClient.SecretList, o)
}

func (c timedClient) SecretInspectWithRaw(ctx context.Context, id string) (swarm.Secret, []byte, error) {
	return callRaw(c, ctx, c.APIClient.SecretInspectWithRaw, id)
}

func (c timedClient) ServiceCreate(ctx context.Context, s swarm.ServiceSpec, o swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error) {
	return call2(c, ctx, c.APIClient.ServiceCreate, s, o)
}

func (c timedClient) ServiceInspectWithRaw(ctx context.Context, id string, o swarm.ServiceInspectOptions) (swarm.Service, []byte, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceInspectWithRaw(ctx, id, o)
}

func (c timedClient) ServiceList(ctx context.Context, o swarm.ServiceListOptions) ([]swarm.Service, error) {
	return call1(c, ctx, c.APIClient.ServiceList, o)
}

func (c timedClient) ServiceRemove(ctx context.Context, id string) error {
	return callErr(c, ctx, c.APIClient.ServiceRemove, id)
}

func (c timedClient) ServiceUpdate(ctx context.Context, id string, v swarm.Version, s swarm.ServiceSpec, o swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ServiceUpdate(ctx, id, v, s, o)
}

func (c timedClient) TaskList(ctx context.Context, o swarm.TaskListOptions) ([]swarm.Task, error) {
	return call1(c, ctx, c.APIClient.TaskList, o)
}

func (c timedClient) TaskInspectWithRaw(ctx context.Context, id string) (swarm.Task, []byte, error) {
	return callRaw(c, ctx, c.APIClient.TaskInspectWithRaw, id)
}

func (c timedClient) NodeInspectWithRaw(ctx context.Context, id string) (swarm.Node, []byte, error) {
	return callRaw(c, ctx, c.APIClient.NodeInspectWithRaw, id)
}

func (c timedClient) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	return call2(c, ctx, c.APIClient.NetworkCreate, name, o)
}

func (c timedClient) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	return call1(c, ctx, c.APIClient.NetworkList, o)
}

func (c timedClient) NetworkRemove(ctx context.Context, id string) error {
	return callErr(c, ctx, c.APIClient.NetworkRemove, id)
}

func (c timedClient) ImageInspect(ctx context.Context, id string, o ...client.ImageInspectOption) (image.InspectResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	return c.APIClient.ImageInspect(ctx, id, o...)
}
