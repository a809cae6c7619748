package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/aimi-tools/swarm/daemon/instancelock"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/internal/dockertest"
	"github.com/aimi-tools/swarm/internal/sandboximage"
)

// Names this package puts on the host engine.
const (
	// NodeImageRepo is the repository of the node image; its tag is a
	// prefix of the image's content key.
	NodeImageRepo = "aimi-clusternode"
	// LabelCluster marks every container and network of a cluster with
	// the cluster's run id (next to dockertest.LabelKey, which cleanup uses).
	LabelCluster = "org.aimi.test-cluster"
	// labelOwner holds "<pid> <socket dir>" of the test process that made
	// a cluster, so a later Start can remove the cluster of a process that
	// died without its Close (a panicking test ends the process at once).
	labelOwner = "org.aimi.test-cluster-owner"
	// labelOwnerProc holds "<boot id> <pid namespace> <start time>" of
	// that process (instancelock.Self): a pid alone names another process
	// in another pid namespace, or after a reboot.
	labelOwnerProc = "org.aimi.test-cluster-owner-proc"
	// socketDir is where a node's dockerd puts its API socket, inside the
	// node; a host directory is bound there.
	socketDir = "/run/aimi-node"
	// swarmPort is the Swarm mode cluster management port.
	swarmPort = "2377"
)

// nodePackages are the Debian packages of the node image: the engine and
// its runtime pieces, the iptables it programs, and a shell with core tools
// for debugging a node by hand. apt adds the libraries.
var nodePackages = []string{"ca-certificates", "containerd", "coreutils", "dash", "docker.io", "iptables", "kmod", "procps", "runc", "tini"}

// nodeLinks are what the iptables package's postinst would make with
// update-alternatives; legacy rather than nft because that is what was
// verified to work inside a container (engine 20.10, cgroup v1).
var nodeLinks = []sandboximage.Link{
	{Path: "/usr/sbin/iptables", Target: "xtables-legacy-multi"},
	{Path: "/usr/sbin/iptables-save", Target: "xtables-legacy-multi"},
	{Path: "/usr/sbin/iptables-restore", Target: "xtables-legacy-multi"},
	{Path: "/usr/sbin/ip6tables", Target: "xtables-legacy-multi"},
	{Path: "/usr/sbin/ip6tables-save", Target: "xtables-legacy-multi"},
	{Path: "/usr/sbin/ip6tables-restore", Target: "xtables-legacy-multi"},
}

// Timeouts of cluster start-up; each is several times what it took here.
const (
	nodeReadyTimeout  = 90 * time.Second // dockerd answered in about 5 s
	swarmReadyTimeout = 90 * time.Second // nodes Ready in a few seconds
	cleanupTimeout    = 2 * time.Minute  // removing the nodes deletes their images and layers
)

// Options configure Start.
type Options struct {
	// Workers is the number of worker nodes besides the manager; default 2.
	Workers int
	// Images are host engine image references loaded into every node.
	Images []string
	// Logger for progress; default slog.Default().
	Logger *slog.Logger
}

// Node is one engine of the cluster.
type Node struct {
	Name        string         // container name on the host engine, also the node's hostname
	ContainerID string         // on the host engine
	Addr        string         // IPv4 address on the cluster bridge
	Host        string         // DOCKER_HOST value of the node's API (unix socket)
	NodeID      string         // Swarm node id
	Manager     bool           // the swarm manager
	Client      *client.Client // API client of the node's engine
}

// Cluster is a running Swarm mode cluster of container nodes.
type Cluster struct {
	RunID   string  // value of dockertest.LabelKey on everything created
	Network string  // the host bridge the nodes share
	Gateway string  // the test machine's address on that bridge: where tasks reach services the test runs
	Nodes   []*Node // Nodes[0] is the manager
	Took    time.Duration

	host    *client.Client
	dir     string
	log     *slog.Logger
	started time.Time
	// nodeArgs, nodeMounts and nodeCaps are added to every node's dockerd
	// arguments, mounts and capabilities (StartEngine's options).
	nodeArgs   []string
	nodeMounts []mount.Mount
	nodeCaps   []string
}

// Manager returns the manager node.
func (c *Cluster) Manager() *Node { return c.Nodes[0] }

// Start builds (or reuses) the node image, starts the nodes, forms the
// swarm and loads opts.Images into every node. On error everything already
// created is removed.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	c, ref, labels, err := begin(ctx, opts.Logger, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = c.closeAfter(ctx, err)
		}
	}()
	if err := c.startNodes(ctx, ref, opts.Workers, labels); err != nil {
		return nil, err
	}
	c.log.Info("cluster: engines up", "nodes", len(c.Nodes), "since-start", time.Since(c.started).Round(time.Millisecond))

	if err := c.formSwarm(ctx); err != nil {
		return nil, err
	}
	c.log.Info("cluster: swarm ready", "since-start", time.Since(c.started).Round(time.Millisecond))
	if err := c.loadImages(ctx, opts.Images); err != nil {
		return nil, err
	}
	return c, nil
}

// begin makes what every cluster starts from: the host client, the socket
// directory, the node image (with extra packages), the bridge network and
// the labels of everything the cluster creates. Orphaned clusters go first.
func begin(ctx context.Context, log *slog.Logger, extra []string) (_ *Cluster, ref string, labels map[string]string, err error) {
	if log == nil {
		log = slog.Default()
	}
	host, err := dockertest.NewClient()
	if err != nil {
		return nil, "", nil, err
	}
	if _, err := host.Ping(ctx); err != nil {
		host.Close()
		return nil, "", nil, fmt.Errorf("no Docker engine answers (%w); start one or set %s=1 to skip", err, dockertest.SkipEnv)
	}
	host.NegotiateAPIVersion(ctx)
	c := &Cluster{RunID: dockertest.RunID(), host: host, log: log, started: time.Now()}
	defer func() {
		if err != nil {
			err = c.closeAfter(ctx, err)
		}
	}()
	c.dir, err = os.MkdirTemp("", "aimi-cluster-")
	if err != nil {
		return nil, "", nil, fmt.Errorf("make cluster socket dir: %w", err)
	}
	ref, cached, err := sandboximage.PackageImage(ctx, sandboximage.PackageImageOptions{
		Repo: NodeImageRepo, Packages: append(slices.Clone(nodePackages), extra...), Links: nodeLinks,
		Entrypoint: []string{"/usr/sbin/dockerd"}, Client: host, Logger: log,
	})
	if err != nil {
		return nil, "", nil, fmt.Errorf("node image: %w", err)
	}
	log.Info("cluster: node image", "ref", ref, "cached", cached, "since-start", time.Since(c.started).Round(time.Millisecond))

	removeOrphans(ctx, host, log)
	labels = map[string]string{dockertest.LabelKey: c.RunID, LabelCluster: c.RunID, labelOwner: fmt.Sprintf("%d %s", os.Getpid(), c.dir), labelOwnerProc: ownerProc()}
	if err := c.createNetwork(ctx, labels); err != nil {
		return nil, "", nil, err
	}
	return c, ref, labels, nil
}

// closeAfter removes what c holds after err and returns err with the
// removal's own error, if any.
func (c *Cluster) closeAfter(ctx context.Context, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if cerr := c.Close(cctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// loadImages loads images into every node and records how long the start
// took.
func (c *Cluster) loadImages(ctx context.Context, images []string) error {
	for _, img := range images {
		if err := c.LoadImage(ctx, img); err != nil {
			return err
		}
	}
	c.Took = time.Since(c.started)
	c.log.Info("cluster: ready", "took", c.Took.Round(time.Millisecond))
	return nil
}

// createNetwork creates the cluster's bridge network and notes its gateway.
func (c *Cluster) createNetwork(ctx context.Context, labels map[string]string) error {
	c.Network = "aimi-cluster-" + c.RunID
	if _, err := c.host.NetworkCreate(ctx, c.Network, network.CreateOptions{Driver: "bridge", Labels: labels}); err != nil {
		return fmt.Errorf("create cluster network %s: %w", c.Network, err)
	}
	n, err := c.host.NetworkInspect(ctx, c.Network, network.InspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect cluster network: %w", err)
	}
	if len(n.IPAM.Config) == 0 || n.IPAM.Config[0].Gateway == "" {
		return fmt.Errorf("cluster network %s has no gateway address", c.Network)
	}
	c.Gateway = n.IPAM.Config[0].Gateway
	return nil
}

// startNodes starts the manager and the workers at once; the first node is
// the manager.
func (c *Cluster) startNodes(ctx context.Context, ref string, workers int, labels map[string]string) error {
	names := []string{"manager"}
	for i := 1; i <= workers; i++ {
		names = append(names, "worker"+strconv.Itoa(i))
	}
	c.Nodes = make([]*Node, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			node, err := c.startNode(gctx, ref, name, labels)
			c.Nodes[i] = node
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.Nodes[0].Manager = true
	return nil
}

// startNode runs one node container and waits for its engine to answer.
func (c *Cluster) startNode(ctx context.Context, ref, role string, labels map[string]string) (*Node, error) {
	name := "aimi-cluster-" + c.RunID + "-" + role
	sock := filepath.Join(c.dir, role)
	if err := os.MkdirAll(sock, 0o755); err != nil {
		return nil, fmt.Errorf("make socket dir of %s: %w", name, err)
	}
	cfg, hc := c.nodeConfig(ref, role, sock, labels)
	resp, err := c.host.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	node := &Node{Name: name, ContainerID: resp.ID, Host: "unix://" + filepath.Join(sock, "docker.sock")}
	if err := c.host.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return node, fmt.Errorf("start node %s: %w", name, err)
	}
	insp, err := c.host.ContainerInspect(ctx, resp.ID)
	if err != nil {
		return node, fmt.Errorf("inspect node %s: %w", name, err)
	}
	if ep := insp.NetworkSettings.Networks[c.Network]; ep != nil {
		node.Addr = ep.IPAddress
	}
	if node.Addr == "" {
		return node, fmt.Errorf("node %s has no address on %s", name, c.Network)
	}
	node.Client, err = client.NewClientWithOpts(client.WithHost(node.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return node, fmt.Errorf("client of node %s: %w", name, err)
	}
	return node, c.waitEngine(ctx, node, resp.ID)
}

// nodeConfig is the container config of node role, an engine listening on a
// socket in the host directory sock.
func (c *Cluster) nodeConfig(ref, role, sock string, labels map[string]string) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:    ref,
		Hostname: role,
		Labels:   labels,
		Cmd: []string{
			// No --storage-driver: dockerd takes the first its kernel and
			// backing filesystem allow, overlay2 on the node's volume
			// where it can. vfs (always possible) copies the whole image
			// for every container it creates (0.7 s against 0.07 s for
			// the sandbox image on an idle machine, far more under the
			// test suite's load).
			// Run state on a tmpfs: a node restarted after a kill must
			// not find the old pid file and refuse to start.
			"--exec-root=/run/docker", "--pidfile=/run/docker.pid",
			"--host=unix://" + socketDir + "/docker.sock",
			// The socket belongs to the test's group, so a test running
			// as a docker-group user (not root) can use it.
			"--group=" + strconv.Itoa(os.Getgid()),
		},
	}
	cfg.Cmd = append(cfg.Cmd, c.nodeArgs...)
	hc := &container.HostConfig{
		// --privileged fails on engines whose runc cannot apply the whole
		// capability set (engine 20.10 on cgroup v1);
		// these are what dockerd needs for namespaces, mounts, iptables
		// and overlay networks.
		CapAdd:       append([]string{"SYS_ADMIN", "NET_ADMIN"}, c.nodeCaps...),
		SecurityOpt:  []string{"seccomp=unconfined", "apparmor=unconfined"},
		CgroupnsMode: container.CgroupnsModeHost,
		NetworkMode:  container.NetworkMode(c.Network),
		Mounts: []mount.Mount{
			// Read-only cgroups make every inner container fail
			// ("mkdir /sys/fs/cgroup/cpuset/docker: read-only file system").
			{Type: mount.TypeBind, Source: "/sys/fs/cgroup", Target: "/sys/fs/cgroup"},
			{Type: mount.TypeTmpfs, Target: "/run"},
			{Type: mount.TypeBind, Source: sock, Target: socketDir},
			// An anonymous volume, removed with the node: the node's
			// storage on the volume's plain filesystem, where overlay2
			// can stack (not on the container's own overlay).
			{Type: mount.TypeVolume, Target: "/var/lib/docker"},
		},
	}
	hc.Mounts = append(hc.Mounts, c.nodeMounts...)
	return cfg, hc
}

// waitEngine waits until the engine of node answers, for at most
// nodeReadyTimeout, and fails early when its container exited.
func (c *Cluster) waitEngine(ctx context.Context, node *Node, id string) error {
	deadline := time.Now().Add(nodeReadyTimeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, perr := node.Client.Ping(pctx)
		cancel()
		if perr == nil {
			node.Client.NegotiateAPIVersion(ctx)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("engine of node %s did not answer within %s: %w%s", node.Name, nodeReadyTimeout, perr, c.nodeLogTail(ctx, id))
		}
		if st, ierr := c.host.ContainerInspect(ctx, id); ierr == nil && st.State != nil && !st.State.Running {
			return fmt.Errorf("node %s exited (code %d) before its engine answered%s", node.Name, st.State.ExitCode, c.nodeLogTail(ctx, id))
		}
		if err := ctxutil.Sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// nodeLogTail is the end of a node's dockerd log, for errors.
func (c *Cluster) nodeLogTail(ctx context.Context, id string) string {
	rc, err := c.host.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 16<<10))
	return "; node log:\n" + string(b)
}

// formSwarm initialises the swarm on the manager and joins the workers.
func (c *Cluster) formSwarm(ctx context.Context) error {
	m := c.Manager()
	id, err := m.Client.SwarmInit(ctx, swarm.InitRequest{
		ListenAddr:    "0.0.0.0:" + swarmPort,
		AdvertiseAddr: m.Addr,
		Spec:          swarm.Spec{Annotations: swarm.Annotations{Labels: map[string]string{LabelCluster: c.RunID}}},
	})
	if err != nil {
		return fmt.Errorf("swarm init on %s: %w", m.Name, err)
	}
	m.NodeID = id
	sw, err := m.Client.SwarmInspect(ctx)
	if err != nil {
		return fmt.Errorf("swarm inspect: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range c.Nodes[1:] {
		g.Go(func() error {
			err := w.Client.SwarmJoin(gctx, swarm.JoinRequest{
				ListenAddr: "0.0.0.0:" + swarmPort, AdvertiseAddr: w.Addr,
				RemoteAddrs: []string{m.Addr + ":" + swarmPort}, JoinToken: sw.JoinTokens.Worker,
			})
			if err != nil {
				return fmt.Errorf("swarm join of %s: %w", w.Name, err)
			}
			info, err := w.Client.Info(gctx)
			if err != nil {
				return fmt.Errorf("info of %s: %w", w.Name, err)
			}
			w.NodeID = info.Swarm.NodeID
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return c.WaitNodesReady(ctx, swarmReadyTimeout)
}

// WaitNodesReady waits until the manager sees every node Ready, for at
// most d: a node a load or a stop left Down gets no tasks, and a test of
// where tasks run would see them all on the others.
func (c *Cluster) WaitNodesReady(ctx context.Context, d time.Duration) error {
	m := c.Manager()
	deadline := time.Now().Add(d)
	for {
		nodes, err := m.Client.NodeList(ctx, swarm.NodeListOptions{})
		if err != nil {
			return fmt.Errorf("list swarm nodes: %w", err)
		}
		ready := 0
		for _, n := range nodes {
			if n.Status.State == swarm.NodeStateReady {
				ready++
			}
		}
		if ready == len(c.Nodes) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d swarm nodes Ready after %s", ready, len(c.Nodes), d)
		}
		if err := ctxutil.Sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// LoadImage copies an image of the host engine into every node (ImageSave
// once, ImageLoad on each node at once), which is what a cluster without a
// registry needs.
func (c *Cluster) LoadImage(ctx context.Context, ref string) error {
	start := time.Now()
	f, err := os.CreateTemp(c.dir, "image-*.tar")
	if err != nil {
		return fmt.Errorf("load image %s: %w", ref, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rc, err := c.host.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("save image %s on the host engine: %w", ref, err)
	}
	_, err = io.Copy(f, rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("save image %s on the host engine: %w", ref, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range c.Nodes {
		g.Go(func() error {
			r, err := os.Open(f.Name())
			if err != nil {
				return err
			}
			defer r.Close()
			return LoadImage(gctx, n.Client, r)
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("load image %s: %w", ref, err)
	}
	c.log.Info("cluster: image loaded into every node", "image", ref, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// LoadImage loads an image archive (ImageSave's format) into one engine and
// reports an error the engine puts in its progress stream.
func LoadImage(ctx context.Context, cli client.APIClient, archive io.Reader) error {
	resp, err := cli.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read load progress: %w", err)
	}
	if s := string(b); strings.Contains(s, `"error"`) {
		return fmt.Errorf("engine: %s", strings.TrimSpace(s))
	}
	return nil
}

// StopNode stops node i's container (its engine dies with it), as a
// machine failing would. The node stays in the swarm, Down.
func (c *Cluster) StopNode(ctx context.Context, i int) error {
	n := c.Nodes[i]
	timeout := 0
	if err := c.host.ContainerStop(ctx, n.ContainerID, container.StopOptions{Timeout: &timeout}); err != nil {
		return fmt.Errorf("stop node %s: %w", n.Name, err)
	}
	return nil
}

// Close removes every node, its volume and the network (by the run's
// label) and the socket directory.
func (c *Cluster) Close(ctx context.Context) error {
	for _, n := range c.Nodes {
		if n != nil && n.Client != nil {
			n.Client.Close()
		}
	}
	err := dockertest.CleanupByLabel(ctx, dockertest.LabelKey, c.RunID)
	if c.dir != "" {
		if rerr := os.RemoveAll(c.dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove cluster socket dir: %w", rerr))
		}
	}
	c.host.Close()
	return err
}

// StartNode starts a stopped node again; its engine rejoins the swarm with
// the state it kept, and StartNode returns once the manager sees it Ready.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	n := c.Nodes[i]
	if err := c.host.ContainerStart(ctx, n.ContainerID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start node %s: %w", n.Name, err)
	}
	// A restarted engine replays its swarm state before it rejoins: longer
	// than a first join, more so on a loaded machine.
	deadline := time.Now().Add(2 * swarmReadyTimeout)
	for {
		node, _, err := c.Manager().Client.NodeInspectWithRaw(ctx, n.NodeID)
		if err == nil && node.Status.State == swarm.NodeStateReady {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready %s after its restart (last error: %v)%s", n.Name, 2*swarmReadyTimeout, err, c.nodeLogTail(ctx, n.ContainerID))
		}
		if err := ctxutil.Sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// removeOrphans removes the clusters whose test process is gone: their
// owner labels name a process of this boot and pid namespace that no
// longer runs (instancelock.ProcessGone). Clusters of live processes, and
// of processes that cannot be checked from here (another pid namespace on
// a shared host, or no owner process label), are left alone.
// ownerProc is this process's labelOwnerProc value.
func ownerProc() string {
	o := instancelock.Self("", "", "")
	return strings.Join([]string{o.BootID, o.PIDNS, o.PIDStart}, " ")
}

func removeOrphans(ctx context.Context, host *client.Client, log *slog.Logger) {
	cs, err := host.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelOwner))})
	if err != nil {
		return
	}
	done := map[string]bool{}
	for _, ct := range cs {
		run := ct.Labels[LabelCluster]
		pidText, dir, _ := strings.Cut(ct.Labels[labelOwner], " ")
		pid, err := strconv.Atoi(pidText)
		proc := strings.Fields(ct.Labels[labelOwnerProc])
		if run == "" || done[run] || err != nil || len(proc) != 3 || !instancelock.ProcessGone(proc[0], proc[1], pid, proc[2]) {
			continue
		}
		done[run] = true
		log.Info("cluster: removing the cluster of a test process that is gone", "run", run, "pid", pid)
		if err := dockertest.CleanupByLabel(ctx, dockertest.LabelKey, run); err != nil {
			log.Warn("cluster: remove an orphaned cluster", "run", run, "err", err)
		}
		if strings.HasPrefix(filepath.Base(dir), "aimi-cluster-") {
			_ = os.RemoveAll(dir)
		}
	}
}
