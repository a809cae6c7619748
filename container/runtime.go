package container

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// gvisorRegister and gvisorInstallGuide are named when gVisor's runsc is
// registered in a way that cannot run the sandboxes, or missing.
const (
	gvisorRegister     = "register it in the engine's daemon.json with runtimeArgs [\"--network=host\", \"--host-uds=open\"] and send dockerd SIGHUP (docs/gvisor.md)"
	gvisorInstallGuide = "apt-get install runsc, then " + gvisorRegister
)

// installGuide is where to read how to install runtime.
func installGuide(runtime string) string {
	if isGVisor(runtime, "") {
		return gvisorInstallGuide
	}
	return runtimeInstallGuide
}

// isGVisor reports whether a runtime registered as name with path is
// gVisor's runsc.
func isGVisor(name, path string) bool {
	return strings.HasPrefix(name, "runsc") || strings.HasPrefix(filepath.Base(path), "runsc")
}

// EngineInfoError is CheckRuntime's when the engine could not be asked.
type EngineInfoError struct{ Err error }

func (e *EngineInfoError) Error() string { return "read engine info: " + e.Err.Error() }
func (e *EngineInfoError) Unwrap() error { return e.Err }

// CheckRuntime says why the engine's registration of the OCI runtime name
// cannot run the sandboxes, or nil when it can or when the engine does not
// have it (Create then falls back to the default or refuses, as the spec's
// RequireRuntime says). sockets tells that the sandboxes have no network
// and reach the daemon through unix sockets on a bind mount. Only gVisor's
// runsc is checked: its defaults fail both ways.
func (d *Docker) CheckRuntime(ctx context.Context, name string, sockets bool) error {
	info, err := d.cli.Info(ctx)
	if err != nil {
		return &EngineInfoError{err}
	}
	rt, ok := info.Runtimes[name]
	if !ok || !isGVisor(name, rt.Path) {
		return nil
	}
	if why := gvisorProblem(rt.Args, sockets); why != "" {
		return fmt.Errorf("the engine's runtime %q (%s %s) %s; %s", name, rt.Path, strings.Join(rt.Args, " "), why, gvisorRegister)
	}
	return nil
}

// gvisorProblem says what runsc's arguments lack to run the sandboxes, or
// "". runsc's own network mode ("sandbox") fails on a container's network
// namespace ("cannot run with network enabled in root network
// namespace"); "none" gives the sandbox gVisor's loopback only, enough
// when the daemon's services come through sockets. A sandbox connects to
// those sockets only with --host-uds=open (or all, or the older
// --fsgofer-host-uds); without it connect fails with "operation not
// permitted".
func gvisorProblem(args []string, sockets bool) string {
	flags := runscFlags(args)
	switch net := flags["network"]; {
	case net == "host":
	case net == "none" && sockets:
	case sockets:
		return "runs every sandbox with runsc's network mode " + cmp.Or(net, "sandbox") + ", which fails to start a container here; add --network=host (or --network=none)"
	default:
		return "runs every sandbox with runsc's network mode " + cmp.Or(net, "sandbox") + "; sandboxes on a network need --network=host"
	}
	if !sockets {
		return ""
	}
	switch flags["host-uds"] {
	case "open", "all":
		return ""
	}
	if v, ok := flags["fsgofer-host-uds"]; ok && v != "false" {
		return ""
	}
	return "does not let a sandbox connect to its sockets under /run/aimi/net (git, the egress proxy, the model gateway); add --host-uds=open"
}

// runscFlags reads runsc's global flags from runtime arguments: -name,
// --name, with =value or the next argument as the value ("true" for a
// flag followed by another flag or nothing).
func runscFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, val, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			val = "true"
			if name != "fsgofer-host-uds" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				val = args[i+1]
				i++
			}
		}
		out[name] = val
	}
	return out
}
