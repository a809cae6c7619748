package container

import (
	"maps"

	"github.com/aimi-tools/swarm/contract"
)

// Engine-side names this package relies on.
const (
	// runtimeInstallGuide is named in the error when a required runtime is
	// missing from the engine.
	runtimeInstallGuide = "https://github.com/nestybox/sysbox#installation"
	// imageBuildHint tells the user how to get the sandbox image; there is
	// no registry to pull from.
	imageBuildHint = "build it with 'make sandbox-image'"
	// iccOption is the bridge driver option that, set to "false", drops
	// traffic between containers on the same bridge. One such network per
	// swarm isolates its containers from each other while using a single
	// address pool entry (the engine's default pools allow only about 30
	// bridge networks in all, so a network per container stops at ~30).
	iccOption = "com.docker.network.bridge.enable_icc"
	// mtuOption is the bridge driver's MTU option; see defaultMTU.
	mtuOption = "com.docker.network.driver.mtu"
	// logDriver is a driver the logs endpoint can read back.
	logDriver = "json-file"
	// logMaxSize and logMaxFile bound the disk a chatty container can use.
	// The log is also the buffer that carries a container's output across a
	// daemon restart: while a following reader runs, the container cannot
	// get more than about backPressureWindow plus the engine's 1 MB attach
	// pipe ahead of it (see Lines), but with no reader (the daemon down) a
	// container more than max-size x max-file ahead loses the rotated-out
	// lines, and the engine says nothing about it. 128 MiB is about a
	// million progress-updates; a runner writes two per story.
	logMaxSize = "32m"
	logMaxFile = "4"
	// noNewPrivileges forbids gaining privileges through setuid binaries.
	noNewPrivileges = "no-new-privileges:true"
)

// sameOwner says why a container labelled have is not one a spec labelled
// want may replace: the sandbox marker, the daemon's instance and the
// repository (path, and its directory's identity when both name one) must
// all match. nil when they do.
func sameOwner(have, want map[string]string) error {
	sel := map[string]string{contract.LabelSandbox: "true"}
	for _, k := range []string{contract.LabelDaemon, contract.LabelProject} {
		if v, ok := want[k]; ok {
			sel[k] = v
		}
	}
	if v := want[contract.LabelRepoID]; v != "" && have[contract.LabelRepoID] != "" {
		sel[contract.LabelRepoID] = v
	}
	return contract.CheckLabels(have, sel)
}

// ownerOf is what an object of this Docker carries: the sandbox marker,
// the owner labels (WithOwner) and, of want, the keys named.
func (d *Docker) ownerOf(want map[string]string, keys ...string) map[string]string {
	sel := map[string]string{contract.LabelSandbox: "true"}
	for k, v := range d.owner {
		sel[k] = v
	}
	for _, k := range keys {
		if v, ok := want[k]; ok {
			sel[k] = v
		}
	}
	return sel
}

// WithOwner sets labels (the daemon's instance) that every network this
// Docker uses or removes must carry: another daemon's is left alone.
func WithOwner(labels map[string]string) Option {
	return func(d *Docker) { d.owner = maps.Clone(labels) }
}
