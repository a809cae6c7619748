// Command probeagent is a test runner image for the model gateway: in a
// sandbox it calls the model the way an agent would (ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY, the trust store SSL_CERT_FILE names), JSON and SSE,
// then looks for the real key everywhere it can read (/proc/*/environ,
// /proc/*/cmdline, every readable file) without being given it: it gets
// the key's public prefix, length and SHA-256 (PROBE_KEY_PREFIX,
// PROBE_KEY_LEN, PROBE_KEY_SHA256) and hashes every candidate. It writes
// its verdict to /tmp/result and stays until /tmp/release exists, so the
// test can exec into it; then it reports completion. It never runs in
// production.
//
//	probeagent            the runner (reads the task-request)
//	probeagent report     print /tmp/result (exit 3 while there is none)
//	probeagent call B K   POST B/v1/messages with x-api-key K, print the status
//	probeagent release    let the runner finish
//	probeagent net-relay  a Swarm mode sandbox's relay, as acp-runner's
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
	aimirunner "github.com/aimi-tools/swarm/runner"
	"github.com/aimi-tools/swarm/runner/forward"
)

const (
	resultFile  = "/tmp/result"
	releaseFile = "/tmp/release"
)

func main() {
	if len(os.Args) > 1 {
		os.Exit(command(os.Args[1:]))
	}
	// As acp-runner does: a sandbox of the warm pool gets its environment
	// (placeholders, forwards, the CA) in its claim lines first.
	stdin := bufio.NewReader(os.Stdin)
	os.MkdirAll(os.TempDir(), 0o1777) // the claim's files go there; the image has no /tmp
	if err := aimirunner.ApplyWarmClaim(os.Getenv, os.Setenv, stdin, os.TempDir()); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	if err := aimirunner.LoadSecretEnv(os.Getenv, os.Setenv, contract.SecretDir); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	// As acp-runner does: a sandbox without a network reaches the
	// daemon's services through these loopback forwards.
	if _, err := forward.FromEnv(context.Background(), os.Getenv, slog.Default()); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	src, err := aimirunner.RequestInput(os.Getenv, aimirunner.SkipClaims(stdin))
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	line, _ := bufio.NewReader(src).ReadBytes('\n')
	var req struct {
		SwarmID     string `json:"swarmId"`
		ContainerID string `json:"containerId"`
	}
	json.Unmarshal(line, &req)
	os.MkdirAll("/tmp", 0o1777)
	problems := append(callModel(), scan()...)
	verdict := "OK"
	if len(problems) > 0 {
		verdict = "FAIL: " + strings.Join(problems, "; ")
	}
	fmt.Fprintln(os.Stderr, "probe:", verdict)
	os.WriteFile(resultFile, []byte(verdict), 0o644)
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(releaseFile); err == nil {
			break
		}
	}
	m := acpmsg.NewMessage(acpmsg.TypeCompletion, req.SwarmID, req.ContainerID, &acpmsg.Completion{Status: "completed", Errors: []string{}})
	b, _ := json.Marshal(m)
	os.Stdout.Write(append(b, '\n'))
}

func command(args []string) int {
	switch args[0] {
	case "report":
		b, err := os.ReadFile(resultFile)
		if err != nil {
			return 3
		}
		os.Stdout.Write(b)
	case "net-relay": // on a cluster the sandbox's image is its relay's too
		r, err := forward.RelayFromEnv(os.Getenv, contract.NetKeyFile, contract.NetCAFile)
		if err == nil {
			err = r.Run(context.Background())
		}
		return exit(err)
	case "release":
		return exit(os.WriteFile(releaseFile, nil, 0o644))
	case "call":
		if len(args) != 3 {
			return 2
		}
		code, _, err := post(args[1], args[2], false)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println(code)
	default:
		return 2
	}
	return 0
}

func exit(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// post sends one Messages API call; Go's TLS reads SSL_CERT_FILE.
func post(base, key string, stream bool) (int, string, error) {
	body := `{"model":"claude-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"claude-test","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(base, "/")+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

// callModel is what an agent does: both kinds of call, as configured.
func callModel() []string {
	var probs []string
	base, key := os.Getenv("ANTHROPIC_BASE_URL"), os.Getenv("ANTHROPIC_API_KEY")
	if base == "" {
		return []string{"no ANTHROPIC_BASE_URL"}
	}
	for _, v := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"} {
		if os.Getenv(v) == "" {
			probs = append(probs, v+" unset")
		}
	}
	code, body, err := post(base, key, false)
	if err != nil || code != 200 || !strings.Contains(body, `"text":"hello"`) {
		probs = append(probs, fmt.Sprintf("JSON call: %d %v %.200q", code, err, body))
	}
	code, body, err = post(base, key, true)
	if err != nil || code != 200 || !strings.Contains(body, "message_stop") {
		probs = append(probs, fmt.Sprintf("streamed call: %d %v %.200q", code, err, body))
	}
	return probs
}

// scan looks for the real key in every process's environment and command
// line and in every readable file.
func scan() []string {
	pre := []byte(os.Getenv("PROBE_KEY_PREFIX"))
	n, _ := strconv.Atoi(os.Getenv("PROBE_KEY_LEN"))
	want := os.Getenv("PROBE_KEY_SHA256")
	if len(pre) == 0 || n <= len(pre) || want == "" {
		return []string{"probe not configured"}
	}
	holds := func(b []byte) bool {
		for i := 0; ; {
			j := bytes.Index(b[i:], pre)
			if j < 0 {
				return false
			}
			i += j
			if i+n <= len(b) {
				sum := sha256.Sum256(b[i : i+n])
				if hex.EncodeToString(sum[:]) == want {
					return true
				}
			}
			i++
		}
	}
	var found []string
	procs, _ := os.ReadDir("/proc")
	read := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile(filepath.Join("/proc", p.Name(), f)); err == nil {
				read++
				if holds(b) {
					found = append(found, "the key is in /proc/"+p.Name()+"/"+f)
				}
			}
		}
	}
	if read == 0 {
		found = append(found, "could not read any /proc/*/environ")
	}
	files := 0
	filepath.WalkDir("/", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (path == "/proc" || path == "/sys" || path == "/dev") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > 64<<20 {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		files++
		if holds(b) {
			found = append(found, "the key is in "+path)
		}
		return nil
	})
	fmt.Fprintf(os.Stderr, "probe: scanned %d /proc files and %d files\n", read, files)
	return found
}
