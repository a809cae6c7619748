package runner

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/contract"
)

// TestAskGoesToTheAskSocketWhenThereIsOne: AIMI_NET_FORWARD's ask forward
// becomes the channel (before the git service, whose token and CA a
// remote-mode container lacks), and a request sent there carries no
// token; without a forward or a git service there is no channel.
func TestAskGoesToTheAskSocketWhenThereIsOne(t *testing.T) {
	if u := socketURLOf("3128=proxy,3130=ask,3129=models", contract.AskSocket, contract.AskPath); u != "http://127.0.0.1:3130"+contract.AskPath {
		t.Errorf("socketURLOf: %q", u)
	}
	for _, spec := range []string{"", "3128=proxy", "bad"} {
		if u := socketURLOf(spec, contract.AskSocket, contract.AskPath); u != "" {
			t.Errorf("socketURLOf(%q) = %q, want none", spec, u)
		}
	}
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		var req contract.AskRequest
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != contract.AskPath || json.Unmarshal(b, &req) != nil || req.StoryID != "US-001" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(contract.AskAnswer{State: contract.AskAnswered, OptionID: "yes"})
	}))
	defer srv.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ch, err := openAskChannel(srv.URL+contract.AskPath, "https://git.example:8443/repo.git", "token", "/nonexistent", false, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := ch.forStory("US-001").Ask(context.Background(), acpclient.Question{Title: "Write a.md", Kind: "edit",
		Options: []contract.AskOption{{ID: "yes", Kind: "allow_once"}}})
	if err != nil || opt != "yes" || auth != "" {
		t.Errorf("answer %q %v, Authorization %q: want yes, and no token", opt, err, auth)
	}
	if _, err := openAskChannel("", "https://origin.example/repo.git", "", "", false, nil, log); err == nil {
		t.Error("a channel without an ask socket or a git service")
	}
	// A remote origin with a token and a CA of its own is no way to the
	// daemon: the question (and the token) must not go there.
	origin := httptest.NewTLSServer(http.NotFoundHandler())
	defer origin.Close()
	originCA := filepath.Join(t.TempDir(), "origin-ca.pem")
	if err := os.WriteFile(originCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: origin.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openAskChannel("", origin.URL+"/repo.git", "origin-token", originCA, false, nil, log); err == nil {
		t.Error("a permission request would go to a remote origin")
	}
}
