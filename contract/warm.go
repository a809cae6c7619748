package contract

import (
	"encoding/json"
	"fmt"
	"strings"
)

// WarmLabelPool is LabelWarm's value on every warm-pool sandbox.
const WarmLabelPool = "pool"

// WarmClaim is the first stdin line of a claimed warm-pool sandbox
// (EnvWarm): what a created container gets at create time and a sandbox
// created before its task was known must get later. It is written to the
// runner's stdin only (never journaled or logged): Env holds secrets.
type WarmClaim struct {
	// Env is the runner's environment of a created container, KEY=VALUE
	// (agent settings, secrets, the git token).
	Env []string `json:"env"`
	// CAPEM is the git service's CA certificate (local mode): a created
	// container has it bind-mounted; a claimed one writes it to a file of
	// its own and points EnvGitSSLCAInfo there.
	CAPEM string `json:"caPem,omitempty"`
}

// MaxWarmClaimBytes bounds a claim line: one stdin line of the engine
// (acpmsg.MaxLineBytes).
const MaxWarmClaimBytes = 64 << 10

// ParseWarmClaim reads a claim line. Errors never quote the line: it
// holds secrets.
func ParseWarmClaim(line []byte) (WarmClaim, error) {
	var c WarmClaim
	if len(line) > MaxWarmClaimBytes {
		return c, fmt.Errorf("warm claim: %d bytes, more than %d", len(line), MaxWarmClaimBytes)
	}
	if err := json.Unmarshal(line, &c); err != nil {
		return WarmClaim{}, fmt.Errorf("warm claim: not the claim line (JSON object with env): %T", err)
	}
	for i, kv := range c.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !ValidEnvName(k) {
			return WarmClaim{}, fmt.Errorf("warm claim: env entry %d is not NAME=VALUE", i)
		}
	}
	return c, nil
}
