package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/attempts"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/engine"
	"github.com/aimi-tools/swarm/internal/logcursor"
)

// scoreTimeout bounds one score command's sandbox.
const scoreTimeout = 15 * time.Minute

// maxScoreOutput bounds what is read of a score command's output: only
// its last line counts.
const maxScoreOutput = 64 << 10

// scoreAttempt runs swarm.score_command on c's tip in a sealed sandbox of
// the swarm's image (no network, no secret, the tip's tree as its
// workspace) and returns its number; nil when it failed, which ranks the
// attempt below those with a score.
func (sw *swarm) scoreAttempt(ctx context.Context, c *ctr, tip string) *float64 {
	if c == nil || tip == "" {
		return nil
	}
	log := sw.m.log.With("swarm", sw.id, "container", c.name)
	out, err := sw.runScore(ctx, c, tip)
	if err != nil {
		log.Warn("score command", "tip", tip, "err", err)
		return nil
	}
	v, err := attempts.ParseScore(out)
	if err != nil {
		log.Warn("score command", "tip", tip, "err", err)
		return nil
	}
	log.Info("attempt scored", "tip", tip, "score", v)
	return &v
}

// runScore makes the scoring sandbox of c's tip, runs it to its end and
// returns its standard output; the sandbox and its tree go after.
func (sw *swarm) runScore(ctx context.Context, c *ctr, tip string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, scoreTimeout)
	defer cancel()
	dir, err := os.MkdirTemp(sw.m.cfg.RadarDir, "score-")
	if err != nil {
		if err = os.MkdirAll(sw.m.cfg.RadarDir, 0o700); err == nil {
			dir, err = os.MkdirTemp(sw.m.cfg.RadarDir, "score-")
		}
		if err != nil {
			return "", fmt.Errorf("make the score's workspace: %w", err)
		}
	}
	defer os.RemoveAll(dir)
	tree := filepath.Join(dir, "workspace")
	if err := writeTree(ctx, sw.repo, tip, tree); err != nil {
		return "", err
	}
	spec := sw.scoreSpec(c, tree)
	_ = sw.m.eng.Remove(context.WithoutCancel(ctx), spec.Name) // one a killed daemon left
	id, err := sw.m.eng.Create(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("create the scoring sandbox %s: %w", spec.Name, err)
	}
	defer func() { _ = sw.m.eng.Remove(context.WithoutCancel(ctx), id) }()
	exit := sw.m.eng.Wait(ctx, id)
	if err := sw.m.eng.Start(ctx, id); err != nil {
		return "", fmt.Errorf("start the scoring sandbox %s: %w", spec.Name, err)
	}
	var ex engine.Exit
	select {
	case ex = <-exit:
	case <-ctx.Done():
		return "", fmt.Errorf("the score command did not end within %s", scoreTimeout)
	}
	if ex.Err != nil {
		return "", fmt.Errorf("wait for the scoring sandbox: %w", ex.Err)
	}
	out, errOut := sw.scoreOutput(ctx, id)
	if ex.Code != 0 {
		return "", fmt.Errorf("the score command exited %d: %s", ex.Code, cutText(oneLine(errOut), 512))
	}
	return out, nil
}

// scoreSpec is the scoring sandbox of c: the swarm's image and limits, no
// network, tree as its workspace, `acp-runner score` as its process.
func (sw *swarm) scoreSpec(c *ctr, tree string) engine.Spec {
	cfg := sw.m.cfg
	labels := sw.labels()
	labels[contract.LabelAttempt] = c.name
	return engine.Spec{
		Name:            c.name + "-score",
		Image:           sw.image,
		Labels:          labels,
		Env:             []string{contract.EnvScoreCommand + "=" + cfg.ScoreCommand, contract.EnvWorkspace + "=" + contract.DefaultWorkspace},
		NanoCPUs:        int64(cfg.CPUs * 1e9),
		MemoryBytes:     cfg.MemoryBytes,
		MemorySwapBytes: cfg.MemorySwapBytes,
		PidsLimit:       cfg.PidsLimit,
		Runtime:         cfg.Runtime,
		RequireRuntime:  cfg.RequireRuntime,
		Network:         engine.NetworkNone,
		Sealed:          true,
		Mounts:          []engine.Mount{{Source: tree, Target: contract.DefaultWorkspace}},
		Cmd:             []string{"score"},
	}
}

// scoreOutput reads the sandbox's standard output and error, each
// bounded.
func (sw *swarm) scoreOutput(ctx context.Context, id string) (string, string) {
	lines, err := sw.m.eng.Lines(ctx, id, logcursor.Position{}, false)
	if err != nil {
		return "", err.Error()
	}
	var out, errOut bytes.Buffer
	for ln := range lines {
		b := &out
		if ln.Stream == engine.Stderr {
			b = &errOut
		}
		if b.Len()+len(ln.Data) < maxScoreOutput {
			b.Write(ln.Data)
			b.WriteByte('\n')
		}
	}
	return out.String(), errOut.String()
}

// writeTree writes the tree of commit tip of repo into dir (git archive,
// unpacked by tar), writable by the sandbox's user.
func writeTree(ctx context.Context, repo, tip, dir string) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	archive := landGit.Command(ctx, repo, "archive", "--format=tar", tip)
	unpack := exec.CommandContext(ctx, "tar", "-x", "--no-same-owner", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	unpack.Stdin = pipe
	var aerrs, uerrs bytes.Buffer // apart: the two write at once
	archive.Stderr, unpack.Stderr = &aerrs, &uerrs
	if err := unpack.Start(); err != nil {
		return fmt.Errorf("unpack %s for its score: %w", tip, err)
	}
	aerr := archive.Run()
	uerr := unpack.Wait()
	if aerr != nil || uerr != nil {
		return fmt.Errorf("write the tree of %s for its score: %v %v: %s %s", tip, aerr, uerr, strings.TrimSpace(aerrs.String()), strings.TrimSpace(uerrs.String()))
	}
	// The sandbox's user is the image's, not the daemon's.
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		mode := os.FileMode(0o666)
		if d.IsDir() {
			mode = 0o777
		} else if info, err := d.Info(); err == nil && info.Mode()&0o111 != 0 {
			mode = 0o777
		}
		return os.Chmod(p, mode)
	})
}
