package sandboxnet

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/daemonca"
)

// newSwarmNet serves the sandboxes of a Docker Swarm mode cluster: their
// nodes share no filesystem with the daemon, so each sandbox's relay
// (package swarmmode) connects to the door on git.address, over TLS with
// the daemon's CA, and presents the sandbox's key. Behind the door the
// services are those of one engine's sockets.
func newSwarmNet(o Options) (*Net, error) {
	cfg, dataDir := o.Config, o.DataDir
	ip := net.ParseIP(cfg.Git.Address)
	if ip == nil {
		return nil, fmt.Errorf("git.address %q: not an IP address; set it to an IP of this machine every node reaches", cfg.Git.Address)
	}
	caDir := filepath.Join(dataDir, "git") // the git service's and the gateway's CA
	if err := os.MkdirAll(caDir, 0o700); err != nil {
		return nil, fmt.Errorf("the sandboxes' door: %w", err)
	}
	ca, _, err := daemonca.LoadOrCreate(caDir)
	if err != nil {
		return nil, fmt.Errorf("the sandboxes' door: %w", err)
	}
	cert, err := ca.ServerCert(ip)
	if err != nil {
		return nil, fmt.Errorf("the sandboxes' door: %w", err)
	}
	n := newNet(o)
	d, err := egress.NewDoor(Dir(dataDir), ip.String(), cert, o.Log, n.services(cfg, o.Git, o.Models)...)
	if err != nil {
		return nil, err
	}
	n.door, n.caPEM = d, ca.CertPEM
	return n, nil
}
