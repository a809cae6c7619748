package contract

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// WarmLabelPool is LabelWarm's value on every warm-pool sandbox.
const WarmLabelPool = "pool"

// WarmClaim is one claim line of a claimed warm-pool sandbox (EnvWarm):
// what a created container gets at create time and a sandbox created
// before its task was known must get later. The lines are written to the
// runner's stdin only (never journaled or logged): they hold secrets.
type WarmClaim struct {
	// Env is the runner's environment of a created container, KEY=VALUE
	// (agent settings, secrets, the git token); on the first line only.
	// It comes first: every claim line starts with WarmClaimPrefix.
	Env []string `json:"env"`
	// Files are the files a created container has bind-mounted (the
	// daemon's CA, a CA bundle): the runner writes each to a directory of
	// its own, and an Env value naming a file's Path names its copy
	// instead. A file's Data may continue on the next lines (same Path).
	Files []WarmFile `json:"files,omitempty"`
	// More: another claim line follows.
	More bool `json:"more,omitempty"`
}

// WarmFile is a file of a claim, or a part of it.
type WarmFile struct {
	Path string `json:"path"` // where a created container has it
	Data string `json:"data"`
}

// WarmClaimPrefix starts every claim line (a task-request never does).
const WarmClaimPrefix = `{"env":`

// Bounds of a claim: a line is one stdin line of the engine
// (acpmsg.MaxLineBytes); the lines together carry at most
// MaxWarmClaimFiles bytes of files.
const (
	MaxWarmClaimBytes = 64 << 10
	MaxWarmClaimLines = 128
	MaxWarmClaimFiles = 4 << 20
)

// ParseWarmClaim reads a claim line. Errors never quote the line: it
// holds secrets.
func ParseWarmClaim(line []byte) (WarmClaim, error) {
	var c WarmClaim
	if len(line) > MaxWarmClaimBytes {
		return c, fmt.Errorf("warm claim: %d bytes, more than %d", len(line), MaxWarmClaimBytes)
	}
	if !strings.HasPrefix(string(line), WarmClaimPrefix) {
		// A task-request where the claim should be: the daemon does not
		// know the sandbox is a warm one.
		return c, fmt.Errorf("warm claim: the line is not a claim (it must start with %s)", WarmClaimPrefix)
	}
	if err := json.Unmarshal(line, &c); err != nil {
		return WarmClaim{}, fmt.Errorf("warm claim: not a claim line (JSON object with env): %T", err)
	}
	for i, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !ValidEnvName(k) {
			return WarmClaim{}, fmt.Errorf("warm claim: env entry %d is not NAME=VALUE", i)
		}
	}
	for i, f := range c.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || path.Base(f.Path) == "/" {
			return WarmClaim{}, fmt.Errorf("warm claim: file %d: path is not an absolute, clean file path", i)
		}
	}
	return c, nil
}
