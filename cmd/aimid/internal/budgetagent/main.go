// Command budgetagent is an ACP agent for the budget tests. On every
// prompt it calls the model through the model gateway (ANTHROPIC_BASE_URL
// with the placeholder in ANTHROPIC_API_KEY) up to BUDGETAGENT_CALLS times
// (default 1), appending a line to work.txt after each answered call; at
// the first call not answered 2xx it writes the status and body to
// refusal.txt and ends its turn in error (a JSON-RPC error), as real
// agents do once their own retries are spent. With BUDGETAGENT_HOLD set
// (a duration) it first starts, once, a process of its own session (it
// outlives the story: the runner's kill of the agent's process group
// misses it) that holds the container's budget socket: connections that
// send a request's head and never its body, opened again whenever one is
// closed; the story then takes that long (past the daemon's bound on the
// runner's idle connection of its last question). It runs
// in the sandbox image, started by the real acp-runner; it never runs in
// production.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aimi-tools/swarm/contract"
)

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		hold()
		return
	}
	enc := json.NewEncoder(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "" || len(m.ID) == 0 {
			continue
		}
		answer := func(result any) { enc.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result}) }
		switch m.Method {
		case "initialize":
			answer(map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}})
		case "session/new":
			answer(map[string]any{"sessionId": fmt.Sprintf("budget-%d", time.Now().UnixNano())})
		case "session/prompt":
			if d, err := time.ParseDuration(os.Getenv("BUDGETAGENT_HOLD")); err == nil {
				startHolder(d)
			}
			if err := calls(); err != nil {
				enc.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": err.Error()}})
				continue
			}
			answer(map[string]any{"stopReason": "end_turn"})
		}
	}
}

// calls makes the prompt's model calls; an error once one is refused.
func calls() error {
	n, err := strconv.Atoi(os.Getenv("BUDGETAGENT_CALLS"))
	if err != nil || n < 1 {
		n = 1
	}
	for i := 0; i < n; i++ {
		status, body, err := call()
		if err != nil || status/100 != 2 {
			os.WriteFile("refusal.txt", []byte(fmt.Sprintf("%d %v\n%s\n", status, err, body)), 0o644)
			return fmt.Errorf("model call failed: %d: %.300s", status, body)
		}
		f, err := os.OpenFile("work.txt", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "call %d answered\n", i+1)
		f.Close()
	}
	return nil
}

// call posts one Messages API call.
func call() (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(os.Getenv("ANTHROPIC_BASE_URL"), "/")+"/v1/messages",
		strings.NewReader(`{"model":"claude-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), nil
}

// startHolder starts the holder once per container (a marker file in
// /tmp), and waits d.
func startHolder(d time.Duration) {
	f, err := os.OpenFile("/tmp/budgetagent-holder", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	f.Close()
	self, _ := os.Executable()
	cmd := exec.Command(self, "hold")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "budgetagent: holder:", err)
		return
	}
	time.Sleep(d)
	st, _ := os.ReadFile(holdLog)
	fmt.Fprintf(os.Stderr, "budgetagent: holder started, pid %d: %s\n", cmd.Process.Pid, strings.TrimSpace(string(st)))
}

// holdLog is where the holder says how it fares.
const holdLog = "/tmp/budgetagent-hold.log"

// holders is how many connections the holder keeps open: more than the
// daemon ever served at once on a budget socket.
const holders = 16

// hold keeps holders connections to the budget socket, each with a head
// sent and the body never.
func hold() {
	sock := filepath.Join(contract.NetDir, contract.BudgetSocket+".sock")
	for i := 0; i < holders; i++ {
		go func() {
			for {
				holdOne(sock)
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	select {}
}

// opened and closed count the holder's connections, for holdLog.
var opened, closed atomic.Int64

func holdOne(sock string) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		os.WriteFile(holdLog, []byte("dial: "+err.Error()), 0o644)
		return
	}
	defer c.Close()
	_, err = fmt.Fprint(c, "POST /_aimi/budget HTTP/1.1\r\nHost: budget\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
	os.WriteFile(holdLog, []byte(fmt.Sprintf("opened %d, closed %d (write: %v)", opened.Add(1), closed.Load(), err)), 0o644)
	b, _ := io.ReadAll(io.LimitReader(c, 512)) // until the daemon closes it
	os.WriteFile(holdLog, []byte(fmt.Sprintf("opened %d, closed %d: %q", opened.Load(), closed.Add(1), b)), 0o644)
}
