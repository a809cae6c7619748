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

func TestOwnerOnAnotherHostCountsAsLive(t *testing.T) {
	self := Owner{PID: 10, BootID: "a", PIDNS: "pid:[1]"}
	for _, o := range []Owner{{PID: 10, BootID: "b", PIDNS: "pid:[1]"}, {PID: 10, BootID: "a", PIDNS: "pid:[2]"}, {PID: 10}} {
		if liveness(self, o) != unknown {
			t.Errorf("%+v: not unknown", o)
		}
	}
	err := &HeldError{Owner: Owner{Instance: "x", PID: 10}, Marker: MarkerName("x"), Unchecked: true}
	if !strings.Contains(err.Error(), "docker rm -f aimid-instance-x") {
		t.Errorf("%v", err)
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
