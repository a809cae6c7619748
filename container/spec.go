package container

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strings"
)

// namePattern is the shape of every container and network name aimi creates;
// the prefix keeps aimi's resources recognisable on a shared engine.
const namePattern = `^aimi-[a-zA-Z0-9][a-zA-Z0-9_-]*$`

// maxNameLen keeps names well inside what the engine and iptables comments
// accept.
const maxNameLen = 128

var (
	nameRE    = regexp.MustCompile(namePattern)
	envKeyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	runtimeRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
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
	// read-only root: each gets an anonymous volume, seeded from the image's
	// content and ownership at that path and removed with the container.
	Scratch        []string
	Runtime        string // "" = engine default; e.g. "sysbox-runc"
	RequireRuntime bool   // a missing Runtime is ErrRuntimeMissing instead of a fallback to the default

	// Network is the network to join (from EnsureNetwork). "" joins the
	// engine's default bridge, which does NOT isolate containers from each
	// other; "host" is refused; NetworkNone gives it a loopback only.
	Network    string
	Mounts     []Mount  // bind mounts
	ExtraHosts []string // "name:ip" or "name:host-gateway"
	User       string   // user[:group] inside the container; "" = image default
	WorkingDir string   // absolute; "" = image default
	Cmd        []string // overrides the image's CMD when non-empty

	// LogMaxSize is the engine's log file size before it rotates (json-file
	// max-size, e.g. "32m"); "" = the default. The engine keeps a few such
	// files, so it bounds the output that can wait unread while no follow
	// reader holds the container back (see Lines).
	LogMaxSize string
}

// Mount is a bind mount from the engine's host into the container.
type Mount struct {
	Source   string // absolute path on the engine's host
	Target   string // absolute path in the container
	ReadOnly bool
}

// ValidName reports whether name is a valid aimi container or network name.
func ValidName(name string) bool {
	return len(name) <= maxNameLen && nameRE.MatchString(name)
}

func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w %q: must match %s and be at most %d characters", ErrInvalidName, name, namePattern, maxNameLen)
	}
	return nil
}

// validate checks everything that can be checked without the engine, so a bad
// spec never leaves anything behind. Env values never appear in errors.
func (s *Spec) validate() error {
	if err := checkName(s.Name); err != nil {
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
		if !ok || !envKeyRE.MatchString(k) {
			// Only the key (or the index) is shown: values may be secrets.
			if ok {
				return s.bad("env entry %d: key %q must match %s", i, k, envKeyRE)
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
	if s.Runtime != "" && !runtimeRE.MatchString(s.Runtime) {
		return s.bad("runtime %q must match %s", s.Runtime, runtimeRE)
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
	if s.Network != "" && !runtimeRE.MatchString(s.Network) {
		return s.bad("network %q must match %s", s.Network, runtimeRE)
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

// Validate checks everything about s that can be checked without an
// engine; other engines (Swarm mode) validate with it before their own
// rules.
func (s *Spec) Validate() error { return s.validate() }
