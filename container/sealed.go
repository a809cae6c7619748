package container

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/atomicfile"
)

// loopbackHosts is a sealed sandbox's /etc/hosts: the names the engine
// writes for a container on network "none", so that tools in it find
// localhost as they would anywhere.
const loopbackHosts = "127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"ff00::0\tip6-mcastprefix\n" +
	"ff02::1\tip6-allnodes\n" +
	"ff02::2\tip6-allrouters\n"

// hostsMountTarget is where a sealed sandbox's hosts file is mounted.
const hostsMountTarget = "/etc/hosts"

// WithSealedHosts lets sealed sandboxes (Spec.Sealed) start without the
// engine's network setup. For a container on network "none" the engine
// still makes a network sandbox, and its start runs a hook that executes
// the engine's whole binary again: a third of a start's time and CPU on
// a busy engine. With networking disabled the container gets a network
// namespace of its own with only its loopback, as on "none", but no
// /etc/hosts from the engine, so path is a file this Docker writes the
// loopback's names into (NewDocker), mounted read-only as that file.
// Only runc's sandboxes go without: runc brings a new namespace's
// loopback up itself, other runtimes (gVisor with the host's network)
// leave it down and rely on the engine's setup. Without this option a
// sealed sandbox is set up as any other.
func WithSealedHosts(path string) Option { return func(d *Docker) { d.sealedHosts = path } }

// runcRuntime is the runtime whose sealed sandboxes go without the
// engine's network setup (WithSealedHosts).
const runcRuntime = "runc"

// prepareSealed writes the hosts file of WithSealedHosts and reads the
// engine's default runtime (an engine whose default is changed while this
// Docker runs keeps the setup it had: the one made for every runtime).
func (d *Docker) prepareSealed(ctx context.Context) error {
	if d.sealedHosts == "" {
		return nil
	}
	if err := d.writeSealedHosts(); err != nil {
		return err
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("read engine info: %w", err)
	}
	d.defaultRuntime = info.DefaultRuntime
	return nil
}

// writeSealedHosts writes the hosts file of WithSealedHosts unless it
// holds the names already (running sandboxes keep the file they mounted).
func (d *Docker) writeSealedHosts() error {
	if !filepath.IsAbs(d.sealedHosts) {
		return fmt.Errorf("sealed sandboxes' hosts file %q: the engine mounts it, so it must be an absolute path", d.sealedHosts)
	}
	if b, err := os.ReadFile(d.sealedHosts); err == nil && bytes.Equal(b, []byte(loopbackHosts)) {
		return nil
	}
	if err := atomicfile.WriteFile(d.sealedHosts, []byte(loopbackHosts), 0o644); err != nil {
		return fmt.Errorf("write the sealed sandboxes' hosts file: %w (check that its directory exists and is writable)", err)
	}
	return nil
}

// sealOff disables a sealed sandbox's networking and mounts its hosts
// file when this Docker has one (WithSealedHosts) and runtime (the one
// the create asks for, "" for the default) is runc. A sandbox with extra
// hosts keeps the engine's setup: those go into the engine's hosts file.
func (d *Docker) sealOff(s *engine.Spec, runtime string, cfg *container.Config, hc *container.HostConfig) {
	if !s.Sealed || d.sealedHosts == "" || len(s.ExtraHosts) > 0 || cmp.Or(runtime, d.defaultRuntime) != runcRuntime {
		return
	}
	cfg.NetworkDisabled = true
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: d.sealedHosts, Target: hostsMountTarget, ReadOnly: true})
}
