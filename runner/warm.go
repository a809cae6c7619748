package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aimi-tools/swarm/contract"
)

// caFileName is where a claimed warm sandbox keeps the git service's CA
// (in its temporary directory: a read-only root leaves /tmp writable).
const caFileName = "aimi-git-ca.pem"

// ApplyWarmClaim is a warm-pool sandbox's wait for its claim
// (contract.EnvWarm): it reads the one claim line from in and sets its
// environment in the runner's own (setenv), as if the engine had set it at
// create time; the CA certificate goes to a file in tmpDir. Nothing to do
// without contract.EnvWarm. The task-request follows on the same reader.
// Errors never carry a value: the claim holds secrets.
func ApplyWarmClaim(getenv func(string) string, setenv func(string, string) error, in *bufio.Reader, tmpDir string) error {
	if getenv(contract.EnvWarm) != "1" {
		return nil
	}
	line, err := readLine(in, contract.MaxWarmClaimBytes)
	if err != nil {
		return fmt.Errorf("warm sandbox: read the claim: %w", err)
	}
	claim, err := contract.ParseWarmClaim(line)
	if err != nil {
		return err
	}
	for _, kv := range claim.Env {
		k, v, _ := strings.Cut(kv, "=")
		if err := setenv(k, v); err != nil {
			return fmt.Errorf("warm sandbox: set %s: %w", k, err)
		}
	}
	if claim.CAPEM == "" {
		return nil
	}
	p := filepath.Join(tmpDir, caFileName)
	if err := os.WriteFile(p, []byte(claim.CAPEM), 0o644); err != nil {
		return fmt.Errorf("warm sandbox: write the git service's CA: %w", err)
	}
	return setenv(contract.EnvGitSSLCAInfo, p)
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
				return nil, errors.New("input ended before the claim line")
			}
			return nil, err
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// claimPrefix starts every claim line (the daemon marshals a
// contract.WarmClaim, whose first field is env).
const claimPrefix = `{"env":`

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
		b, err := s.in.Peek(len(claimPrefix))
		if err != nil || string(b) != claimPrefix {
			s.past = true
			break
		}
		if _, err := readLine(s.in, contract.MaxWarmClaimBytes); err != nil {
			return 0, err
		}
	}
	return s.in.Read(p)
}
