// Command modelagent is an ACP agent for the limit tests: on every prompt
// it calls the model once through the model gateway (ANTHROPIC_BASE_URL
// with the placeholder in ANTHROPIC_API_KEY; Go's TLS trusts the bundle
// SSL_CERT_FILE names) and ends its turn in error (a JSON-RPC error) on a
// non-2xx answer, as real agents do after their own retries; on a 2xx it
// writes model-answer.txt and ends the turn. It offers loadSession and
// answers session/load. It runs in the sandbox image, started by the real
// acp-runner; it never runs in production.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
	} `json:"params"`
}

func main() {
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
			answer(map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{"loadSession": true}})
		case "session/new":
			answer(map[string]any{"sessionId": fmt.Sprintf("model-%d", time.Now().UnixNano())})
		case "session/load":
			answer(map[string]any{})
		case "session/prompt":
			status, err := call()
			fmt.Fprintf(os.Stderr, "modelagent: model call: %d %v\n", status, err)
			if err != nil || status/100 != 2 {
				msg := fmt.Sprintf("model call failed: %d", status)
				if err != nil {
					msg += ": " + err.Error()
				}
				enc.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": msg}})
				continue
			}
			os.WriteFile("model-answer.txt", []byte("the model answered\n"), 0o644)
			enc.Encode(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": m.Params.SessionID,
				"update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "The model answered."}}}})
			answer(map[string]any{"stopReason": "end_turn"})
		}
	}
}

// call posts one Messages API call.
func call() (int, error) {
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(os.Getenv("ANTHROPIC_BASE_URL"), "/")+"/v1/messages",
		strings.NewReader(`{"model":"claude-test","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}
