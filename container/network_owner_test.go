package container

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/dockertest"
)

// TestNetworksOfAnotherDaemonOrSwarmAreLeftAlone: on the real engine, a
// Docker removes and uses only networks carrying its owner labels (the
// daemon's instance) and, to use one, the swarm's and repository's.
func TestNetworksOfAnotherDaemonOrSwarmAreLeftAlone(t *testing.T) {
	cli := dockertest.Client(t)
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := newDocker(cli, WithLogger(slog.New(slog.DiscardHandler)), WithOwner(map[string]string{contract.LabelDaemon: "mine"}))
	mine := map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "mine", contract.LabelSwarmID: "s1", contract.LabelProject: "/src/repo"}

	theirs := "aimi-ct-" + run + "-theirs"
	if _, err := cli.NetworkCreate(ctx, theirs, network.CreateOptions{Driver: "bridge", Options: map[string]string{iccOption: "false"},
		Labels: map[string]string{dockertest.LabelKey: run, contract.LabelSandbox: "true", contract.LabelDaemon: "other", contract.LabelSwarmID: "s1", contract.LabelProject: "/src/repo"}}); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveNetworkIfUnused(ctx, theirs); err == nil || !strings.Contains(err.Error(), "not this daemon's") {
		t.Errorf("remove another daemon's network = %v, want a refusal", err)
	}
	if _, err := d.EnsureNetwork(ctx, theirs, mine); err == nil || !strings.Contains(err.Error(), "not this swarm's") {
		t.Errorf("ensure over another daemon's network = %v, want a refusal", err)
	}
	if _, err := cli.NetworkInspect(ctx, theirs, network.InspectOptions{}); err != nil {
		t.Fatalf("another daemon's network is gone: %v", err)
	}

	own := "aimi-ct-" + run + "-own"
	if _, err := d.EnsureNetwork(ctx, own, mine); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{dockertest.LabelKey: run, contract.LabelDaemon: "mine", contract.LabelSwarmID: "s2", contract.LabelProject: "/src/repo"}
	if _, err := d.EnsureNetwork(ctx, own, other); err == nil || !strings.Contains(err.Error(), contract.LabelSwarmID) {
		t.Errorf("ensure over another swarm's network = %v, want a refusal naming the swarm label", err)
	}
	if _, err := d.EnsureNetwork(ctx, own, mine); err != nil {
		t.Errorf("ensure of the swarm's own network again: %v", err)
	}
	if err := d.RemoveNetworkIfUnused(ctx, own); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.NetworkInspect(ctx, own, network.InspectOptions{}); err == nil {
		t.Error("the daemon's own unused network was not removed")
	}
}
