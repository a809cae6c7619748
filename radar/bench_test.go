package radar

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cpuRunner runs git like internal/gitcmd at nice 10 and sums the CPU its
// processes took: the radar's own cost, apart from the test's.
type cpuRunner struct{ ns atomic.Int64 }

func (c *cpuRunner) RunEnv(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	out, _, err := c.RunEnvCPU(ctx, dir, env, args...)
	return out, err
}

func (c *cpuRunner) RunEnvCPU(ctx context.Context, dir string, env []string, args ...string) (string, time.Duration, error) {
	cmd := exec.CommandContext(ctx, "nice", append([]string{"-n", "10", "git"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "LC_ALL=C"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		c.ns.Add(int64(cpu))
	}
	if err != nil {
		return strings.TrimRight(out.String(), "\n"), cpu, &exitErr{err: fmt.Errorf("git %v: %v: %s", args, err, errb.String()), code: cmd.ProcessState.ExitCode()}
	}
	return strings.TrimRight(out.String(), "\n"), cpu, nil
}

type exitErr struct {
	err  error
	code int
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) ExitCode() int { return e.code }

// pushes makes n commits on each of branches branches, each branch its
// own file plus, for every fourth branch, a line of one shared file (so
// some pairs conflict): the tips a swarm's pushes would bring, in order.
func pushes(b *testing.B, r *repo, branches, n int) [][]string {
	tips := make([][]string, branches)
	for i := range branches {
		name := fmt.Sprintf("b%02d", i)
		for k := range n {
			files := map[string]string{name + ".txt": fmt.Sprintf("%s %d\n", name, k)}
			if i%4 == 0 {
				files["f"] = fmt.Sprintf("one\nTWO-%s-%d\nthree\n", name, k)
			}
			tips[i] = append(tips[i], r.write(name, files))
		}
	}
	return tips
}

// BenchmarkRadarDuty: 32 branches, each pushed once a second for 30 s
// (the tips a swarm's runners would push), a radar looking at every push
// as the daemon's does (one look at a time, coalesced, paused for Duty).
// radar-cpu-share is the CPU of its git processes over the wall time
// (target: at most 0.10, a tenth of one core); looks and merges say how
// much it saw.
func BenchmarkRadarDuty(b *testing.B) {
	const branches, seconds = 32, 30
	t := &testing.T{}
	r := &repo{t: t, dir: b.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write("main", map[string]string{"f": "one\ntwo\nthree\n"})
	all := pushes(b, r, branches, seconds)
	for b.Loop() {
		cpu := &cpuRunner{}
		rd := New(cpu, r.dir, filepath.Join(b.TempDir(), "scratch"))
		w := NewWatcher()
		var mu sync.Mutex
		tips := map[string]string{}
		var looks, merges int
		ctx, cancel := context.WithTimeout(context.Background(), seconds*time.Second)
		go func() {
			tick := time.NewTicker(time.Second / branches)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				i := n % branches
				mu.Lock()
				tips[fmt.Sprintf("b%02d", i)] = all[i][min(n/branches, seconds-1)]
				mu.Unlock()
				w.Kick()
			}
		}()
		start := time.Now()
		w.Run(ctx, func(ctx context.Context) (time.Duration, bool) {
			mu.Lock()
			now := make(map[string]string, len(tips))
			for k, v := range tips {
				now[k] = v
			}
			mu.Unlock()
			rep, err := rd.Look(ctx, Target{Name: "main", Commit: all[0][0]}, now)
			if err == nil {
				looks++
				merges += rep.Merged
			}
			return rep.CPU, true
		})
		wall := time.Since(start)
		cancel()
		b.ReportMetric(float64(cpu.ns.Load())/float64(wall), "radar-cpu-share")
		b.ReportMetric(float64(looks), "looks")
		b.ReportMetric(float64(merges), "merges")
	}
}
