package aimid

import (
	"io"
	"log/slog"
	"testing"

	"github.com/spf13/pflag"

	"github.com/aimi-tools/swarm/configs"
	"github.com/aimi-tools/swarm/gitserve"
)

// TestGitLimitsKeepHalfTheFileLimitInReserve: whatever the open files
// limit, the git service's connections and processes fit in half of it,
// and the push limits are the config's.
func TestGitLimitsKeepHalfTheFileLimitInReserve(t *testing.T) {
	t.Parallel()
	cfg := &configs.Config{Git: configs.Git{MaxPush: 5 << 20, MaxMirror: 9 << 20}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, n := range []uint64{256, 1024, 20000, 1 << 20} {
		l := gitLimits(cfg, n, log)
		if fds := l.FileDescriptors(); fds > int(n/2) || l.MaxConns < 8 || l.MaxBackends < 2 {
			t.Errorf("limit %d: the git service may hold %d descriptors (%d connections, %d processes), want at most half", n, fds, l.MaxConns, l.MaxBackends)
		}
		if l.MaxPush != 5<<20 || l.MaxMirror != 9<<20 {
			t.Errorf("limit %d: push limits %d %d, want the config's", n, l.MaxPush, l.MaxMirror)
		}
	}
	if l := gitLimits(cfg, 20000, log); l.MaxConns != gitserve.DefaultMaxConns || l.MaxBackends != gitserve.DefaultMaxBackends {
		t.Errorf("a large limit: %+v, want the defaults", l)
	}
}

// TestRefusalsNameConfigKeys: the keys a refused push names are config
// keys a user can set.
func TestRefusalsNameConfigKeys(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	configs.AddFlags(fs)
	for _, k := range []string{gitserve.KeyMaxPush, gitserve.KeyMaxMirror} {
		if fs.Lookup(configs.FlagName(k)) == nil {
			t.Errorf("%s is not a config key", k)
		}
	}
}
