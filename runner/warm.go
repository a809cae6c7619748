package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/contract"
)

// ApplyWarmClaim is a warm-pool sandbox's wait for its claim
// (contract.EnvWarm): it reads the claim lines from in and sets their
// environment in the runner's own (setenv), as if the engine had set it at
// create time; the claim's files go to tmpDir, and environment values that
// named a file's path in a created container name its copy. Nothing to do
// without contract.EnvWarm. The task-request follows on the same reader.
// Errors never carry a value: the claim holds secrets.
func ApplyWarmClaim(getenv func(string) string, setenv func(string, string) error, in *bufio.Reader, tmpDir string) error {
	if getenv(contract.EnvWarm) != "1" {
		return nil
	}
	var env []string
	files := map[string]*strings.Builder{}
	var order []string
	total := 0
	for n := 1; ; n++ {
		if n > contract.MaxWarmClaimLines {
			return fmt.Errorf("warm sandbox: more than %d claim lines", contract.MaxWarmClaimLines)
		}
		line, err := readLine(in, contract.MaxWarmClaimBytes)
		if err != nil {
			return fmt.Errorf("warm sandbox: read the claim: %w", err)
		}
		claim, err := contract.ParseWarmClaim(line)
		if err != nil {
			return err
		}
		env = append(env, claim.Env...)
		for _, f := range claim.Files {
			if total += len(f.Data); total > contract.MaxWarmClaimFiles {
				return fmt.Errorf("warm sandbox: the claim's files are over %d bytes", contract.MaxWarmClaimFiles)
			}
			if files[f.Path] == nil {
				files[f.Path] = &strings.Builder{}
				order = append(order, f.Path)
			}
			files[f.Path].WriteString(f.Data)
		}
		if !claim.More {
			break
		}
	}
	copies := map[string]string{}
	for i, p := range order {
		dst := filepath.Join(tmpDir, fmt.Sprintf("aimi-claim-%d-%s", i, path.Base(p)))
		if err := os.WriteFile(dst, []byte(files[p].String()), 0o644); err != nil {
			return fmt.Errorf("warm sandbox: write the claim's file %d: %w", i, err)
		}
		copies[p] = dst
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if c, ok := copies[v]; ok {
			v = c
		}
		if err := setenv(k, v); err != nil {
			return fmt.Errorf("warm sandbox: set %s: %w", k, err)
		}
	}
	return nil
}

// readLine reads one line of at most max bytes (without its newline).
func readLine(in *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := in.ReadLine()
		line = append(line, part...)
		if len(line) > max {
			return nil, fmt.Errorf("line longer than %d bytes", max)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("input ended before the claim")
			}
			return nil, err
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// SkipClaims is in without the claim lines that precede the task-request:
// a daemon that restarted between writing a claim and journaling the
// request writes both again, and the runner takes only the first.
func SkipClaims(in *bufio.Reader) io.Reader {
	return &skipClaims{in: in}
}

type skipClaims struct {
	in   *bufio.Reader
	past bool // a line that is not a claim was seen: pass the rest
}

func (s *skipClaims) Read(p []byte) (int, error) {
	for !s.past {
		b, err := s.in.Peek(len(contract.WarmClaimPrefix))
		if err != nil || string(b) != contract.WarmClaimPrefix {
			s.past = true
			break
		}
		if _, err := readLine(s.in, contract.MaxWarmClaimBytes); err != nil {
			return 0, err
		}
	}
	return s.in.Read(p)
}
