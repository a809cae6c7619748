package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/egress"
	"github.com/aimi-tools/swarm/internal/safefile"
	"github.com/spf13/viper"
)

// EgressAllowKey is the list of hosts sandboxes may reach through the
// daemon's egress proxy.
const EgressAllowKey = "egress.allow"

// Keys of egress.ask: hold a refused connection while a person is asked.
const (
	EgressAskKey     = "egress.ask"
	EgressAskWaitKey = "egress.ask_wait"
)

// maxEgressRules bounds egress.allow (a repository's file adds to it).
const maxEgressRules = 256

// Egress is what sandboxes may reach beyond the daemon's own services.
type Egress struct {
	// Allow are the egress.allow entries, parsed and normalised.
	Allow []egress.Rule
	// Ask holds a connection no rule allows while a person is asked
	// (egress.ask); a repository's file may set it for its swarms.
	Ask bool
	// AskWait is how long such a connection is held (egress.ask_wait).
	AskWait time.Duration
}

// read fills e from v's egress.allow and returns its problems.
func (e *Egress) read(v *viper.Viper, sources []source) []string {
	var probs []string
	e.Allow, probs = egressAllow(v, origin(sources, EgressAllowKey))
	return probs
}

// egressAllow reads and checks egress.allow from v; problems name the key
// and the entry.
func egressAllow(v *viper.Viper, where string) ([]egress.Rule, []string) {
	raw := v.Get(EgressAllowKey)
	if raw == nil {
		return nil, nil
	}
	var entries []string
	switch l := raw.(type) {
	case []any:
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, []string{fmt.Sprintf("%s: entry %v is not a string (from %s); write each entry as a quoted host pattern such as \"registry.npmjs.org\"", EgressAllowKey, e, where)}
			}
			entries = append(entries, s)
		}
	case []string:
		entries = l
	case string:
		if strings.TrimSpace(l) != "" {
			entries = []string{l}
		}
	default:
		return nil, []string{fmt.Sprintf("%s: is not a list (from %s); write a YAML list of host patterns", EgressAllowKey, where)}
	}
	if len(entries) > maxEgressRules {
		return nil, []string{fmt.Sprintf("%s: %d entries, more than %d (from %s); use wildcards such as *.example.com", EgressAllowKey, len(entries), maxEgressRules, where)}
	}
	rules, err := egress.ParseRules(entries)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v (from %s); write [METHOD[,METHOD] ]HOST[:PORT][/PATH], e.g. registry.npmjs.org, *.githubusercontent.com:443 or \"GET api.example.com/v1/\"", EgressAllowKey, err, where)}
	}
	return rules, nil
}

// RepoEgressAsk reads egress.ask of a repository's .aimi/config.yaml:
// nil when the file or the key is not there.
func RepoEgressAsk(repoPath string) (*bool, error) {
	v, err := repoConfig(repoPath)
	if err != nil || v == nil || !v.IsSet(EgressAskKey) {
		return nil, err
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v.GetString(EgressAskKey)))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: is not a boolean; use true or false", filepath.Join(repoPath, RepoConfigPath), EgressAskKey)
	}
	return &b, nil
}

// repoConfig reads a repository's .aimi/config.yaml (nil when it has
// none).
func repoConfig(repoPath string) (*viper.Viper, error) {
	data, err := safefile.ReadIn(repoPath, RepoConfigPath, maxConfigBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(repoPath, RepoConfigPath), err)
	}
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(string(data))); err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %w", filepath.Join(repoPath, RepoConfigPath), err)
	}
	return v, nil
}

// RepoEgressAllow reads the egress.allow entries a repository's
// .aimi/config.yaml adds for its swarms (none when it has no such file).
func RepoEgressAllow(repoPath string) ([]egress.Rule, error) {
	v, err := repoConfig(repoPath)
	if err != nil || v == nil {
		return nil, err
	}
	rules, probs := egressAllow(v, filepath.Join(repoPath, RepoConfigPath))
	if len(probs) > 0 {
		return nil, errors.New(strings.Join(probs, "; "))
	}
	return rules, nil
}
