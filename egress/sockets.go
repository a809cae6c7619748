package egress

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aimi-tools/swarm/contract"
)

// maxSocketPath is what a unix socket's path may hold (sun_path, less its
// terminating zero, on Linux).
const maxSocketPath = 107

// Service is one of the daemon's services a sandbox reaches.
type Service struct {
	Name string     // the socket's file name without ".sock": [a-z]+
	Port func() int // the loopback port the runner serves it on in the sandbox (0: not served yet)
	// Serve answers the sandbox's connections on ln until ln is closed.
	Serve func(ln net.Listener, sb contract.Sandbox) error
}

// Sockets keeps one directory of unix sockets per container, one socket
// per service, under a directory of the daemon's.
type Sockets struct {
	dir      string
	services []Service
	log      *slog.Logger

	mu   sync.Mutex
	open map[contract.Sandbox][]net.Listener
	dirs map[contract.Sandbox]string // sandboxes served in a directory made before them (OpenIn)
}

// NewSockets makes dir (0700: only the daemon's user reaches the sockets
// on the host; a container sees its own directory only, bind-mounted).
func NewSockets(dir string, log *slog.Logger, services ...Service) (*Sockets, error) {
	if log == nil {
		log = slog.Default()
	}
	for _, s := range services {
		if s.Name == "" || strings.Trim(s.Name, "abcdefghijklmnopqrstuvwxyz") != "" || s.Port == nil || s.Serve == nil {
			return nil, fmt.Errorf("sandbox sockets: bad service %q", s.Name)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox sockets: make %s: %w", dir, err)
	}
	return &Sockets{dir: dir, services: services, log: log, open: map[contract.Sandbox][]net.Listener{}, dirs: map[contract.Sandbox]string{}}, nil
}

// Forward is what AIMI_NET_FORWARD holds for the runner: PORT=NAME pairs,
// comma-separated; the runner serves 127.0.0.1:PORT by dialling NAME.sock
// in its socket directory.
func (s *Sockets) Forward() string { return forwardOf(s.services) }

func forwardOf(services []Service) string {
	var parts []string
	for _, sv := range services {
		if p := sv.Port(); p > 0 && p < 65536 {
			parts = append(parts, strconv.Itoa(p)+"="+sv.Name)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Dir is the host directory of sb's sockets (what Open fills).
func (s *Sockets) Dir(sb contract.Sandbox) string {
	h := sha256.Sum256([]byte(sb.Swarm + "\x00" + sb.Container))
	return filepath.Join(s.dir, hex.EncodeToString(h[:8]))
}

// Open (re)creates sb's sockets and serves them; calling it again for an
// open sandbox does nothing. After a daemon restart the old socket files
// are replaced, which a running container sees through its bind mount.
func (s *Sockets) Open(sb contract.Sandbox) (string, error) {
	return s.OpenIn(sb, "")
}

// OpenIn is Open in dir, a directory under the Sockets' own that was
// mounted into the container before it was sb (a warm pool sandbox's,
// made at its create); "" is sb's own directory (Dir).
func (s *Sockets) OpenIn(sb contract.Sandbox, dir string) (string, error) {
	if dir == "" {
		dir = s.Dir(sb)
	} else if rel, err := filepath.Rel(s.dir, dir); err != nil || !filepath.IsLocal(rel) || rel == "." {
		return "", fmt.Errorf("sandbox sockets: %s is not a directory under %s", dir, s.dir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[sb]; ok {
		return s.dirOf(sb), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("sandbox sockets: make %s: %w", dir, err)
	}
	// The container's user (uid 1000, not the daemon's) must reach them.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("sandbox sockets: %w", err)
	}
	var lns []net.Listener
	for _, sv := range s.services {
		ln, err := listenUnix(filepath.Join(dir, sv.Name+".sock"))
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return "", err
		}
		lns = append(lns, ln)
		go func(sv Service, ln net.Listener) {
			if err := sv.Serve(ln, sb); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("sandbox service stopped", "service", sv.Name, "container", sb.Container, "err", err)
			}
		}(sv, ln)
	}
	s.open[sb] = lns
	if dir != s.Dir(sb) {
		s.dirs[sb] = dir
	}
	return dir, nil
}

// dirOf is where sb's sockets are (s.mu held).
func (s *Sockets) dirOf(sb contract.Sandbox) string {
	if d, ok := s.dirs[sb]; ok {
		return d
	}
	return s.Dir(sb)
}

func listenUnix(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("sandbox sockets: %s is longer than a unix socket path may be (%d bytes); give the daemon a shorter data directory", path, maxSocketPath)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox sockets: remove the stale %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("sandbox sockets: listen on %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("sandbox sockets: %w", err)
	}
	return ln, nil
}

// Close stops serving sb: its sockets go, its directory stays. The
// directory is the source of the container's bind mount, and the engine
// cannot copy files out of a stopped container whose bind source is gone
// (docker cp answers that the file does not exist); aimi swarm fetch and a
// rerun read the work a failed push left in the container that way.
// Remove takes it once the engine removed the container.
func (s *Sockets) Close(sb contract.Sandbox) {
	s.mu.Lock()
	lns, dir := s.open[sb], s.dirOf(sb)
	delete(s.open, sb)
	s.mu.Unlock()
	for _, l := range lns {
		_ = l.Close()
	}
	for _, sv := range s.services {
		_ = os.Remove(filepath.Join(dir, sv.Name+".sock"))
	}
}

// Remove stops serving sb and removes its directory (OpenIn's too): the
// engine removed the container.
func (s *Sockets) Remove(sb contract.Sandbox) { s.RemoveIn(sb, "") }

// RemoveIn is Remove for a sandbox whose sockets were served in dir (its
// OpenIn's dir, a directory under the Sockets' own): a daemon that never
// served them (restarted since) knows dir from its caller only. "" is
// what OpenIn recorded, or nothing more.
func (s *Sockets) RemoveIn(sb contract.Sandbox, dir string) {
	s.Close(sb)
	s.mu.Lock()
	served, other := s.dirs[sb]
	delete(s.dirs, sb)
	s.mu.Unlock()
	if other {
		_ = os.RemoveAll(served)
	}
	if rel, err := filepath.Rel(s.dir, dir); dir != "" && err == nil && filepath.IsLocal(rel) && rel != "." {
		_ = os.RemoveAll(dir)
	}
	_ = os.RemoveAll(s.Dir(sb))
}

// CloseAll stops serving every sandbox (the daemon stops); the
// directories stay for a restarted daemon to serve again.
func (s *Sockets) CloseAll() {
	s.mu.Lock()
	all := s.open
	s.open = map[contract.Sandbox][]net.Listener{}
	s.mu.Unlock()
	for _, lns := range all {
		for _, l := range lns {
			_ = l.Close()
		}
	}
}
