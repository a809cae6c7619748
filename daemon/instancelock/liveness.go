package instancelock

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/errdefs"
)

type state int

const (
	gone state = iota
	live
	unknown // cannot be checked from here: counts as live
)

// liveness checks owner from self's point of view:
//
//   - another boot of this kernel: with a local engine (a unix socket) every
//     client of it runs on this kernel, so a marker from an earlier boot is
//     gone (the host rebooted); with a remote engine it may be another host;
//   - this boot, this pid namespace: the pid and its start time in /proc;
//   - this boot, another pid namespace: through the owner's container when
//     it ran in one (a compose deployment): our own container means an
//     earlier run of it (a restart makes a new namespace), another one
//     counts while it runs and has not restarted since the owner started.
func liveness(ctx context.Context, eng Engine, self, owner Owner) state {
	if owner.PID <= 0 || owner.BootID == "" || owner.PIDNS == "" || self.BootID == "" || self.PIDNS == "" {
		return unknown
	}
	if owner.BootID != self.BootID {
		if strings.HasPrefix(eng.DaemonHost(), "unix://") {
			return gone
		}
		return unknown
	}
	if owner.PIDNS != self.PIDNS {
		return containerLiveness(ctx, eng, self, owner)
	}
	start, err := procStart(owner.PID)
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, errExited):
		return gone
	case err != nil:
		return unknown
	case owner.PIDStart != "" && start != owner.PIDStart:
		return gone // the pid belongs to a later process
	}
	return live
}

func containerLiveness(ctx context.Context, eng Engine, self, owner Owner) state {
	if owner.Container == "" {
		return unknown
	}
	if owner.Container == self.Container {
		return gone
	}
	insp, err := eng.ContainerInspect(ctx, owner.Container)
	switch {
	case errdefs.IsNotFound(err):
		return gone
	case err != nil || insp.ContainerJSONBase == nil || insp.State == nil:
		return unknown
	case !insp.State.Running:
		return gone
	}
	started, err := time.Parse(time.RFC3339Nano, insp.State.StartedAt)
	// Started is kept to the second: a restart within that second cannot be
	// told apart and counts as live.
	if err == nil && started.Truncate(time.Second).After(owner.Started) {
		return gone // restarted since: another run of the daemon
	}
	return live
}

// errExited: the process has exited and waits to be reaped (a zombie).
var errExited = errors.New("process exited")

// procStart is field 22 of /proc/<pid>/stat, the start time in clock ticks
// since boot, or errExited for a zombie.
func procStart(pid int) (string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	return statStart(string(data))
}

// statStart reads the start time from a /proc stat line. The command name
// (field 2) may hold spaces and parentheses, so fields are counted after
// its last ')'.
func statStart(stat string) (string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", errors.New("no command field in /proc stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return "", errors.New("short /proc stat")
	}
	if f[0] == "Z" || f[0] == "X" {
		return "", errExited
	}
	return f[19], nil
}

// containerMountRe finds the engine's per-container files (hostname, hosts,
// resolv.conf) the engine bind-mounts into every container it runs.
var containerMountRe = regexp.MustCompile(`/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf) `)

// ownContainer is the id of the engine container this process runs in, or
// "" outside one.
func ownContainer() string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	return containerFromMountinfo(string(data))
}

func containerFromMountinfo(mountinfo string) string {
	if m := containerMountRe.FindStringSubmatch(mountinfo); m != nil {
		return m[1]
	}
	return ""
}

// ProcessGone reports whether the process that Self described as pid, with
// that boot id, pid namespace and start time, has certainly ended: only a
// process of this boot and this pid namespace can be checked, and one that
// cannot be checked is not gone (another pid namespace on a shared host may
// hold it).
func ProcessGone(bootID, pidNS string, pid int, start string) bool {
	self := Self("", "", "")
	if pid <= 0 || bootID == "" || pidNS == "" || start == "" || bootID != self.BootID || pidNS != self.PIDNS {
		return false
	}
	got, err := procStart(pid)
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, errExited):
		return true
	case err != nil:
		return false
	}
	return got != start
}
