package orchestrator

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/tasks"
)

// caMountPath is where the git service's CA is mounted (read-only) in local
// mode.
const caMountPath = contract.DaemonCAPath

// originCAPath is where git.origin_ca is mounted (read-only) in remote mode.
const originCAPath = "/etc/aimi/origin-ca.pem"

// bundleMountPath is where the host's roots plus the daemon's CA are
// mounted (read-only) when the model gateway serves the container.
const bundleMountPath = "/etc/aimi/ca-bundle.pem"

// tasksDir is the only directory task files may come from.
const tasksDir = tasks.Dir + "/"

var (
	nameRe = regexp.MustCompile(`^aimi-[a-zA-Z0-9][a-zA-Z0-9_-]*$`)
)

// checkTaskPath applies the path rules of docs/design.md decision 8 to a
// repo-relative task file path, before anything touches the disk.
func checkTaskPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return fmt.Errorf("absolute path; give it relative to the repository, under %s", tasksDir)
	case strings.Contains(p, "\\"):
		return fmt.Errorf("backslash in path; use / separators")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return fmt.Errorf("path contains '..'; task files must be under %s", tasksDir)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path is not clean (want %q)", path.Clean(p))
	}
	if !strings.HasPrefix(p, tasksDir) {
		return fmt.Errorf("not under %s", tasksDir)
	}
	if !strings.HasSuffix(p, ".json") {
		return fmt.Errorf("does not end in -tasks.json or .json")
	}
	return nil
}

// containerName is aimi-<slug of the task file's base name>, with the .json
// and -tasks suffixes dropped: .aimi/tasks/2026-03-01-auth-tasks.json ->
// aimi-2026-03-01-auth.
func containerName(taskFile string) string {
	base := strings.TrimSuffix(path.Base(taskFile), ".json")
	base = strings.TrimSuffix(base, "-tasks")
	var b strings.Builder
	for _, c := range base { // per rune: one '-' for a multibyte character
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			c = '-'
		}
		b.WriteRune(c)
	}
	s := strings.TrimLeft(b.String(), "-_")
	if s == "" {
		s = "task"
	}
	// Docker names are limited to 128 bytes in practice; keep room for the
	// uniqueness suffix.
	if len(s) > 100 {
		s = strings.TrimRight(s[:100], "-_")
	}
	return "aimi-" + s
}

// uniqueName returns name, or name-2, name-3... whichever is not taken.
func uniqueName(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s-%d", name, i)
		if !taken(n) {
			return n
		}
	}
}

// networkName is the swarm's one network: a network per container would
// exhaust the engine's default address pools at about 30 (docs/design.md decision
// 7), so every container of a swarm shares one bridge with inter-container
// traffic disabled by the container package.
func networkName(swarmID string) string {
	return "aimi-swarm-" + strings.ReplaceAll(swarmID, "-", "")[:12] + "-net"
}
