package engine

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strings"

	"github.com/aimi-tools/swarm/contract"
)

// namePattern is the shape of every container and network name aimi creates;
// the prefix keeps aimi's resources recognisable on a shared engine.
const namePattern = `^aimi-[a-zA-Z0-9][a-zA-Z0-9_-]*$`

// NetworkNone is the Spec.Network of a sandbox that reaches nothing: a
// loopback only, until JoinNetwork gives it its swarm's network (a
// warm-pool sandbox waiting for its claim).
const NetworkNone = "none"

// maxNameLen keeps names well inside what the engine and iptables comments
// accept.
const maxNameLen = 128

var (
	nameRE = regexp.MustCompile(namePattern)
	// networkRE is the engine's rule for a network name given by the
	// caller (not necessarily one aimi made).
	networkRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
)

// Spec describes one sandbox container. Zero limits mean "engine default".
type Spec struct {
	Name   string            // ^aimi-[a-zA-Z0-9][a-zA-Z0-9_-]*$
	Image  string            // must exist on the engine (nothing is pulled)
	Labels map[string]string // org.aimi.* labels (package contract); contract.LabelSandbox=true is added if missing
	Env    []string          // KEY=VALUE; values may be secrets and are never logged or put in errors

	NanoCPUs        int64 // CPU quota in units of 1e-9 CPUs
	MemoryBytes     int64 // memory limit
	MemorySwapBytes int64 // memory+swap limit; equal to MemoryBytes means no swap; -1 unlimited swap
	PidsLimit       int64 // max processes; 0 = engine default, -1 unlimited
	// DiskBytes limits the container's writable layer (the engine's
	// storage-opt size). Only some storage drivers can: the others refuse
	// the create with ErrDiskLimitUnsupported (CheckDiskLimit tells ahead).
	DiskBytes int64

	ReadOnlyRootfs bool // root filesystem read-only (a tmpfs is mounted on /tmp)
	// Scratch lists absolute container paths that stay writable on a
	// read-only root: each gets an anonymous volume (on a cluster, a
	// volume of the task), seeded from the image's content and ownership
	// at that path and removed with the sandbox.
	Scratch []string
	// Runtime is the OCI runtime ("" = engine default; e.g.
	// "sysbox-runc"). Optional: an engine that cannot choose one per
	// sandbox (Swarm mode) warns and uses its default, and refuses the
	// create with ErrRuntimeMissing when RequireRuntime is set.
	Runtime        string
	RequireRuntime bool // a missing Runtime is ErrRuntimeMissing instead of a fallback to the default

	// Network is the network to join (from EnsureNetwork). "" joins the
	// engine's default bridge, which does NOT isolate containers from each
	// other; "host" is refused; NetworkNone gives it a loopback only.
	Network string
	// Sealed: the sandbox stays on NetworkNone for its whole life (its
	// services come through sockets, Mounts), so an engine may leave out
	// the network setup a later JoinNetwork would need (Docker: no
	// network sandbox, whose hook re-runs the engine at every start).
	// JoinNetwork on a sealed sandbox fails.
	Sealed     bool
	Mounts     []Mount  // bind mounts
	ExtraHosts []string // "name:ip" or "name:host-gateway"
	User       string   // user[:group] inside the container; "" = image default
	WorkingDir string   // absolute; "" = image default
	Cmd        []string // overrides the image's CMD when non-empty
	// Relay is how a sandbox of a cluster (Docker Swarm mode) reaches the
	// daemon's services: nil on one engine, whose sandboxes get them as
	// sockets (Mounts).
	Relay *Relay
}

// Relay is a cluster sandbox's way to the daemon's services: a relay of
// its own on its network, which forwards to the daemon's door.
type Relay struct {
	Door    string // HOST:PORT of the daemon's door (TLS)
	Key     string // the sandbox's credential at the door: a secret, for the relay only
	CA      []byte // PEM: the CA that signed the door's certificate
	Forward string // contract.EnvNetForward's value: PORT=NAME pairs
}

// Mount is a bind mount from the engine's host into the container.
type Mount struct {
	Source   string // absolute path on the engine's host
	Target   string // absolute path in the container
	ReadOnly bool
}

// ValidNetwork reports whether name is a network name a spec may give
// (the engine's rule; not necessarily one aimi made).
func ValidNetwork(name string) bool { return networkRE.MatchString(name) }

// ValidName reports whether name is a valid aimi container or network name.
func ValidName(name string) bool {
	return len(name) <= maxNameLen && nameRE.MatchString(name)
}

// CheckName is nil for a valid name, else an ErrInvalidName error that
// names the rule.
func CheckName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w %q: must match %s and be at most %d characters", ErrInvalidName, name, namePattern, maxNameLen)
	}
	return nil
}

// Validate checks everything that can be checked without an engine, so a
// bad spec never leaves anything behind; every engine calls it before its
// own rules. Env values never appear in errors.
func (s *Spec) Validate() error {
	if err := CheckName(s.Name); err != nil {
		return fmt.Errorf("container %w", err)
	}
	// In this order: the first rule broken is the one reported.
	for _, check := range []func() error{s.validateContent, s.validateLimits, s.validatePlacement} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// bad is the error for a spec that breaks a rule.
func (s *Spec) bad(format string, args ...any) error {
	return fmt.Errorf("%w for %s: %s", ErrInvalidSpec, s.Name, fmt.Sprintf(format, args...))
}

// validateContent checks the image, the labels and the environment.
func (s *Spec) validateContent() error {
	if s.Image == "" || strings.ContainsAny(s.Image, " \t\n") {
		return s.bad("image %q must be a non-empty reference without spaces", s.Image)
	}
	for k := range s.Labels {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			return s.bad("label key %q must be non-empty without '=' or spaces", k)
		}
	}
	for i, e := range s.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || !contract.ValidEnvName(k) {
			// Only the key (or the index) is shown: values may be secrets.
			if ok {
				return s.bad("env entry %d: key %q must match %s", i, k, contract.PatternEnvName)
			}
			return s.bad("env entry %d is not KEY=VALUE", i)
		}
	}
	return nil
}

// validateLimits checks the resource limits and the runtime.
func (s *Spec) validateLimits() error {
	if s.NanoCPUs < 0 || s.MemoryBytes < 0 || s.DiskBytes < 0 {
		return s.bad("NanoCPUs, MemoryBytes and DiskBytes must not be negative")
	}
	switch {
	case s.MemorySwapBytes < -1:
		return s.bad("MemorySwapBytes must be -1 (unlimited), 0 (default) or >= MemoryBytes")
	case s.MemorySwapBytes > 0 && s.MemoryBytes == 0:
		return s.bad("MemorySwapBytes needs MemoryBytes")
	case s.MemorySwapBytes > 0 && s.MemorySwapBytes < s.MemoryBytes:
		return s.bad("MemorySwapBytes (%d) must be >= MemoryBytes (%d)", s.MemorySwapBytes, s.MemoryBytes)
	}
	if s.PidsLimit < -1 {
		return s.bad("PidsLimit must be -1 (unlimited), 0 (default) or positive")
	}
	if s.Runtime != "" && !contract.ValidRuntime(s.Runtime) {
		return s.bad("runtime %q must match %s", s.Runtime, contract.PatternRuntime)
	}
	if s.RequireRuntime && s.Runtime == "" {
		return s.bad("RequireRuntime needs Runtime")
	}
	return nil
}

// validatePlacement checks the network, the paths and the user.
func (s *Spec) validatePlacement() error {
	if s.Network == "host" {
		return s.bad("network \"host\" would give the sandbox the host's network stack")
	}
	if s.Network != "" && !ValidNetwork(s.Network) {
		return s.bad("network %q must match %s", s.Network, networkRE)
	}
	if s.Sealed && s.Network != NetworkNone {
		return s.bad("a sealed sandbox stays on network %q, not %q", NetworkNone, s.Network)
	}
	for i, m := range s.Mounts {
		if !cleanAbs(m.Source) || !cleanAbs(m.Target) {
			return s.bad("mount %d: source %q and target %q must be absolute, clean paths", i, m.Source, m.Target)
		}
		if m.Target == "/" {
			return s.bad("mount %d: target must not be /", i)
		}
	}
	for _, p := range s.Scratch {
		if !cleanAbs(p) || p == "/" {
			return s.bad("scratch path %q must be an absolute, clean path other than /", p)
		}
	}
	for _, h := range s.ExtraHosts {
		name, addr, ok := strings.Cut(h, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return s.bad("extra host %q must be name:ip or name:host-gateway", h)
		}
		if addr != "host-gateway" {
			if _, err := netip.ParseAddr(addr); err != nil {
				return s.bad("extra host %q: %q is neither an IP nor host-gateway", h, addr)
			}
		}
	}
	if strings.ContainsAny(s.User, " \t\n") {
		return s.bad("user %q must not contain spaces", s.User)
	}
	if s.WorkingDir != "" && !cleanAbs(s.WorkingDir) {
		return s.bad("working dir %q must be an absolute, clean path", s.WorkingDir)
	}
	return nil
}

func cleanAbs(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p
}
