package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Hermetic runs git without the system and global config of the user it
// runs as (hooksPath, aliases, credential helpers): for repositories the
// daemon owns, where the user's settings must not change what it does.
var Hermetic = Git{Env: []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull}}

// Git runs the git CLI. Env is appended to the daemon's environment, so a
// caller can add GIT_* settings (a hermetic config, a token header through
// GIT_CONFIG_COUNT) without them ever appearing on a command line, where any
// local user could read them in ps.
type Git struct {
	Env []string
	// Nice, when above 0, lowers git's CPU priority by that much (the
	// radar's merges: work that must never slow a push or an agent).
	Nice int
}

// Run runs git in dir and returns its stdout without the trailing newline.
// The error carries git's stderr (which never holds the Env values: git does
// not echo config it was given) so it says why git refused.
func (g Git) Run(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := g.RunEnv(ctx, dir, nil, args...)
	if err != nil {
		return "", err
	}
	return out, nil
}

// RunEnv is Run with env appended to g.Env, and stdout returned whatever
// git's exit: some commands answer through both (merge-tree exits 1 on a
// conflict and lists the conflicted files on stdout).
func (g Git) RunEnv(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	out, _, err := g.RunEnvCPU(ctx, dir, env, args...)
	return out, err
}

// RunInput is RunEnv with stdin as git's input (pack-objects' revisions,
// update-index's paths).
func (g Git) RunInput(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) (string, error) {
	out, _, err := g.run(ctx, dir, env, stdin, args)
	return out, err
}

// RunEnvCPU is RunEnv that also says how much CPU (user and system) git
// took: what a caller that bounds its share of the machine counts.
func (g Git) RunEnvCPU(ctx context.Context, dir string, env []string, args ...string) (string, time.Duration, error) {
	return g.run(ctx, dir, env, nil, args)
}

func (g Git) run(ctx context.Context, dir string, env []string, stdin io.Reader, args []string) (string, time.Duration, error) {
	cmd := g.Command(ctx, dir, args...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Start()
	if err == nil {
		if g.Nice > 0 {
			// Best effort: a git that runs at the default priority is slower
			// for others, not wrong.
			_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, g.Nice)
		}
		err = cmd.Wait()
	}
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	out := strings.TrimRight(stdout.String(), "\n")
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return out, cpu, &GitError{Args: args, Dir: dir, Stderr: msg, Err: err}
	}
	return out, cpu, nil
}

// Command is git with args in dir, in the environment Run gives it, for a
// caller that streams git's input or output (a tree listing read until a
// bound, cat-file --batch): it sets the streams, starts and waits. Nice
// is Run's alone.
func (g Git) Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	// A prompt for credentials would wait for a terminal nobody sees;
	// messages in C so that what is shown or matched does not depend on
	// the daemon's locale.
	cmd.Env = append(append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"), g.Env...)
	return cmd
}

// GitError is a failed git command.
type GitError struct {
	Args   []string
	Dir    string
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s (in %s): %s", strings.Join(e.Args, " "), e.Dir, e.Stderr)
}

func (e *GitError) Unwrap() error { return e.Err }

// ExitCode is git's exit status, or -1 when git did not run to an exit.
func (e *GitError) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// RevParse resolves a ref to an object id, or "" when the ref does not exist.
func (g Git) RevParse(ctx context.Context, dir, ref string) (string, error) {
	out, err := g.Run(ctx, dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	var ge *GitError
	if errors.As(err, &ge) && ge.ExitCode() == 1 {
		return "", nil
	}
	return out, err
}

// IsAncestor reports whether a is an ancestor of (or equal to) b.
func (g Git) IsAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	_, err := g.Run(ctx, dir, "merge-base", "--is-ancestor", a, b)
	var ge *GitError
	if errors.As(err, &ge) && ge.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}
