package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/acpclient"
	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/runner/forward"
)

// askChannel puts permission requests to a person through the daemon,
// never on the container's stdout: the container's own ask socket
// (contract.AskSocket, served on the loopback by the forwards) in either
// git mode, or else the local-mode git service's listener
// (contract.AskPath) with the container's git token. The token stays in
// this process, as it does for git (see relay).
type askChannel struct {
	url    string
	auth   string
	client *http.Client
	log    *slog.Logger
	// retry is the wait between sends after a failure (the daemon away).
	retry time.Duration
}

// newAskChannel reaches the service that serves repoURL. It fails for a
// repository that is not the daemon's own service (remote git mode).
func newAskChannel(repoURL, token, caFile string, dial dialFunc, log *slog.Logger) (*askChannel, error) {
	u, err := url.Parse(repoURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || token == "" || caFile == "" {
		return nil, errors.New("no channel to the daemon: permission requests reach a person through the container's ask socket (a sandbox without a network) or the local-mode git service, and this container has neither")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ask channel: read the CA bundle %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ask channel: no certificate in the CA bundle %s", caFile)
	}
	transport := &http.Transport{
		DialContext:         dialWithin(dial, 10*time.Second),
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool},
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &askChannel{
		url:    (&url.URL{Scheme: "https", Host: u.Host, Path: contract.AskPath}).String(),
		auth:   "Bearer " + token,
		client: &http.Client{Transport: transport, Timeout: 2 * time.Minute},
		log:    log, retry: 2 * time.Second,
	}, nil
}

// openAskChannel picks the channel: the ask socket when the daemon gave the
// container one (askURL), else the local-mode git service when the
// repository is the daemon's (daemonGit). Never a remote origin: a question
// for the daemon, with the origin's token on it, would go to a third party.
func openAskChannel(askURL, repoURL, token, caFile string, daemonGit bool, dial dialFunc, log *slog.Logger) (*askChannel, error) {
	if askURL != "" {
		// No proxy: the loopback forward is the way to the daemon.
		transport := &http.Transport{DialContext: dialWithin(dial, 10*time.Second)}
		return &askChannel{url: askURL, client: &http.Client{Transport: transport, Timeout: 2 * time.Minute}, log: log, retry: 2 * time.Second}, nil
	}
	if !daemonGit {
		return nil, errors.New("no channel to the daemon: permission requests reach a person through the container's ask socket or the local-mode git service, and this container has neither (its repository is not the daemon's git service)")
	}
	return newAskChannel(repoURL, token, caFile, dial, log)
}

// socketURLOf is the URL of path on the loopback forward of the daemon's
// socket name when AIMI_NET_FORWARD (spec) serves it, else "".
func socketURLOf(spec, name, path string) string {
	fws, err := forward.Parse(spec, contract.NetDir)
	if err != nil {
		return ""
	}
	for _, f := range fws {
		if filepath.Base(f.Socket) == name+".sock" {
			return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)) + path
		}
	}
	return ""
}

// forStory is the Asker of one story's agent.
func (a *askChannel) forStory(storyID string) acpclient.Asker {
	return &storyAsker{ch: a, story: storyID}
}

type storyAsker struct {
	ch    *askChannel
	story string
}

// Ask sends the question until the daemon answers it: a daemon that is
// away (restarting) is waited for, a refusal ends the wait with an error
// (the tool call is rejected).
func (s *storyAsker) Ask(ctx context.Context, q acpclient.Question) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	body, err := json.Marshal(contract.AskRequest{ID: hex.EncodeToString(b[:]), StoryID: s.story,
		AskedAt: time.Now().UTC().Format(time.RFC3339Nano), Question: q})
	if err != nil {
		return "", err
	}
	s.ch.log.Info("permission request sent to a person", "story", s.story, "kind", q.Kind)
	warned := false
	for {
		ans, retry, err := s.ch.send(ctx, body)
		switch {
		case err == nil && ans.State == contract.AskAnswered:
			s.ch.log.Info("permission request answered", "story", s.story, "option", ans.OptionID)
			return ans.OptionID, nil
		case err == nil:
			continue // pending: send again, the daemon holds each send a while
		case !retry:
			return "", err
		case !warned:
			s.ch.log.Warn("permission request: the daemon does not answer; trying again", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(s.ch.retry):
		}
	}
}

// send makes one send. retry is true for failures that may pass (the
// daemon away or busy).
func (a *askChannel) send(ctx context.Context, body []byte) (contract.AskAnswer, bool, error) {
	var ans contract.AskAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return ans, false, err
	}
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return ans, ctx.Err() == nil, fmt.Errorf("send the permission request: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(msg, &ans); err != nil || (ans.State != contract.AskPending && ans.State != contract.AskAnswered) {
			return ans, true, fmt.Errorf("the daemon's answer is not an ask answer: %q", strings.TrimSpace(string(msg)))
		}
		return ans, false, nil
	case resp.StatusCode >= 500:
		return ans, true, fmt.Errorf("the daemon answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return ans, false, fmt.Errorf("the daemon refused the permission request (HTTP %d): %s", resp.StatusCode, strings.TrimSpace(string(msg)))
}
