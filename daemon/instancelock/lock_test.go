package instancelock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"

	"github.com/aimi-tools/swarm/internal/dockertest"
)

func testOwner(t *testing.T, instance string) Owner {
	t.Helper()
	o := Self(instance, "/run/test/aimid.sock", "/var/test/data")
	if o.BootID == "" || o.PIDNS == "" || o.PIDStart == "" {
		t.Skip("no /proc to tell live processes from gone ones")
	}
	return o
}

func TestSecondOwnerOfAnInstanceIsRefusedUntilTheFirstReleases(t *testing.T) {
	cli := dockertest.Client(t)
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{dockertest.LabelKey: run}
	instance := "test-" + run

	first := testOwner(t, instance)
	lock, err := Acquire(ctx, cli, first, labels, nil)
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.Socket, second.DataDir = "/other/aimid.sock", "/other/data"
	_, err = Acquire(ctx, cli, second, labels, nil)
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v", err)
	}
	for _, want := range []string{first.Socket, first.DataDir, "pid " + strconv.Itoa(os.Getpid()), "--instance"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(ctx, cli, second, labels, nil)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release(ctx)
}

func TestMarkerOfAGoneDaemonIsTakenOver(t *testing.T) {
	cli := dockertest.Client(t)
	run := dockertest.RunID()
	dockertest.Cleanup(t, dockertest.LabelKey, run)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{dockertest.LabelKey: run}
	instance := "test-" + run

	// A daemon that died without releasing: its pid is gone.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := testOwner(t, instance)
	dead.PID = cmd.Process.Pid
	old, err := Acquire(ctx, cli, dead, labels, nil)
	if err != nil {
		t.Fatal(err)
	}
	self := testOwner(t, instance)
	lock, err := Acquire(ctx, cli, self, labels, nil)
	if err != nil {
		t.Fatalf("stale marker not taken over: %v", err)
	}
	defer lock.Release(ctx)
	if _, err := cli.ContainerInspect(ctx, old.id); !errdefs.IsNotFound(err) {
		t.Errorf("stale marker still there: %v", err)
	}
	insp, err := cli.ContainerInspect(ctx, MarkerName(instance))
	if err != nil || insp.ID != lock.id || ownerFrom(insp.Config.Labels).PID != os.Getpid() {
		t.Fatalf("marker %+v, %v", insp.Config, err)
	}

	// A pid reused by another process counts as gone too.
	lock.Release(ctx)
	reused := testOwner(t, instance)
	reused.PIDStart = "1"
	if _, err := Acquire(ctx, cli, reused, labels, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(ctx, cli, self, labels, nil); err != nil {
		t.Fatalf("marker of a reused pid not taken over: %v", err)
	}
}

// fakeEngine answers liveness's questions: where the engine is, and
// which containers run since when.
type fakeEngine struct {
	Engine
	host       string
	containers map[string]container.State
}

func (f fakeEngine) DaemonHost() string { return f.host }

func (f fakeEngine) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	st, ok := f.containers[id]
	if !ok {
		return container.InspectResponse{}, errdefs.NotFound(errors.New("no such container"))
	}
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: &st}}, nil
}

func TestLivenessAcrossBootsNamespacesAndContainers(t *testing.T) {
	started := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	local := fakeEngine{host: "unix:///var/run/docker.sock", containers: map[string]container.State{
		"running":   {Running: true, StartedAt: started.Add(-time.Hour).Format(time.RFC3339Nano)},
		"restarted": {Running: true, StartedAt: started.Add(time.Minute).Format(time.RFC3339Nano)},
		"exited":    {Running: false, StartedAt: started.Add(-time.Hour).Format(time.RFC3339Nano)},
	}}
	remote := local
	remote.host = "tcp://engine.example:2376"
	self := Owner{PID: 1, BootID: "boot-a", PIDNS: "pid:[1]", Container: "mine", Started: started.Add(time.Hour)}
	owner := func(boot, ns, ctr string) Owner {
		return Owner{PID: 12, BootID: boot, PIDNS: ns, Container: ctr, Started: started}
	}
	for _, tc := range []struct {
		name  string
		eng   Engine
		owner Owner
		want  state
	}{
		{"an earlier boot, local engine: the host rebooted", local, owner("boot-b", "pid:[1]", ""), gone},
		{"another boot, remote engine: maybe another host", remote, owner("boot-b", "pid:[1]", ""), unknown},
		{"nothing recorded", local, Owner{PID: 12}, unknown},
		{"another namespace, no container", local, owner("boot-a", "pid:[2]", ""), unknown},
		{"an earlier run of our own container", local, owner("boot-a", "pid:[2]", "mine"), gone},
		{"another container that runs", local, owner("boot-a", "pid:[2]", "running"), live},
		{"another container, restarted since", local, owner("boot-a", "pid:[2]", "restarted"), gone},
		{"another container, exited", local, owner("boot-a", "pid:[2]", "exited"), gone},
		{"another container, removed", local, owner("boot-a", "pid:[2]", "removed"), gone},
	} {
		if got := liveness(context.Background(), tc.eng, self, tc.owner); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	err := &HeldError{Owner: Owner{Instance: "x", PID: 10}, Marker: MarkerName("x"), Unchecked: true}
	if !strings.Contains(err.Error(), "docker rm -f aimid-instance-x") {
		t.Errorf("%v", err)
	}
}

func TestOwnContainerFromMountinfo(t *testing.T) {
	id := strings.Repeat("ab", 32)
	mi := "612 590 0:52 / / rw,relatime - overlay overlay rw\n" +
		"640 612 8:1 /var/lib/docker/containers/" + id + "/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw\n"
	if got := containerFromMountinfo(mi); got != id {
		t.Errorf("got %q", got)
	}
	if got := containerFromMountinfo("25 1 8:1 / / rw - ext4 /dev/sda1 rw\n"); got != "" {
		t.Errorf("host process: got %q", got)
	}
}

func TestStatStartSkipsTheCommandName(t *testing.T) {
	stat := "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	got, err := statStart(stat)
	if err != nil || got != "987654" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := statStart(strings.Replace(stat, ") S ", ") Z ", 1)); !errors.Is(err, errExited) {
		t.Errorf("zombie: %v", err)
	}
	if _, err := statStart("42 (x"); err == nil {
		t.Error("truncated stat accepted")
	}
}
