package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
)

// storageOptRefused reports whether a create failed because the storage
// driver takes no size option. The engine says so in words only ("--storage-opt
// is not supported", "...is supported only for overlay over xfs with 'pquota'
// mount option", "Storage Option not supported"), as an invalid parameter.
func storageOptRefused(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "storage-opt") || strings.Contains(msg, "storage option") || strings.Contains(msg, "storageopt")
}

// CheckDiskLimit tells whether containers of image can get a writable-layer
// limit (Spec.DiskBytes) on this engine: it creates a container with one,
// never started, and removes it. ErrDiskLimitUnsupported (with the engine's
// words and its storage driver) when the driver refuses; another error when
// the engine could not be asked (the image is missing, say). labels go on
// the probe container next to contract.LabelSandbox.
func (d *Docker) CheckDiskLimit(ctx context.Context, image string, labels map[string]string) error {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("check the disk limit: %w", err)
	}
	name := "aimi-disk-probe-" + hex.EncodeToString(b[:])
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	l[contract.LabelSandbox] = "true"
	cfg := &container.Config{Image: image, Labels: l, Cmd: []string{"true"}}
	hc := &container.HostConfig{StorageOpt: map[string]string{"size": strconv.Itoa(1 << 30)}}
	resp, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err == nil {
		if rerr := d.cli.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true}); rerr != nil {
			d.log.Warn("remove the disk limit probe container", "container", name, "err", rerr)
		}
		return nil
	}
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("check the disk limit: %w: %s (%s)", engine.ErrImageNotFound, image, imageBuildHint)
	}
	if storageOptRefused(err) {
		driver := "unknown"
		if info, ierr := d.cli.Info(ctx); ierr == nil {
			driver = info.Driver
		}
		return fmt.Errorf("%w (storage driver %s): %w", engine.ErrDiskLimitUnsupported, driver, err)
	}
	return fmt.Errorf("check the disk limit: %w", err)
}
