package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/state"
)

// ErrUnreachable: no daemon answers on the socket. The CLI exits 3 for it.
var ErrUnreachable = errors.New("no aimi daemon running")

// UnreachableError says which socket was tried and how to start the daemon.
type UnreachableError struct {
	Socket string
	Err    error
}

// StartHint says how to start the daemon: by hand, or through the system
// unit that ships (deploy/aimid.service), whose socket is not the default
// of a user with a session.
const StartHint = "start it with 'aimid &' or 'sudo systemctl start aimid' (that unit listens on /run/aimi/aimid.sock: pass --socket /run/aimi/aimid.sock or set " + EnvSocket + ")"

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no aimi daemon running at %s (%v); %s", e.Socket, e.Err, StartHint)
}

// Unwrap exposes both ErrUnreachable and the dial error.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// Client talks to aimid over its unix socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client for the daemon at socket ("" = DefaultSocketPath).
func NewClient(socket string) *Client {
	if socket == "" {
		socket = DefaultSocketPath()
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	// No client-wide timeout: streams (follow) run for as long as the caller's
	// context; every call takes a ctx.
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// Socket is the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// api.Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.do(ctx, http.MethodGet, "/v1/health", nil, nil, &h)
}

// Start starts a swarm.
func (c *Client) Start(ctx context.Context, req api.StartRequest) (api.SwarmView, error) {
	var v api.SwarmView
	return v, c.do(ctx, http.MethodPost, "/v1/swarms/start", nil, req, &v)
}

// Status returns the repo's swarm, reconciled by the daemon.
func (c *Client) Status(ctx context.Context, repoPath string) (api.SwarmView, error) {
	var v api.SwarmView
	return v, c.do(ctx, http.MethodGet, "/v1/swarms/status", url.Values{"repo": {repoPath}}, nil, &v)
}

// StatusJSON is Status as the daemon encoded it (an api.SwarmView), for a
// caller that prints it: decoding the state of hundreds of containers
// costs more than the rest of the call.
func (c *Client) StatusJSON(ctx context.Context, repoPath string) ([]byte, error) {
	resp, err := c.request(ctx, http.MethodGet, "/v1/swarms/status", url.Values{"repo": {repoPath}}, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer of GET /v1/swarms/status: %w", err)
	}
	return b, nil
}

// List returns every swarm the daemon holds, sorted by repository.
func (c *Client) List(ctx context.Context) (api.SwarmList, error) {
	var l api.SwarmList
	return l, c.do(ctx, http.MethodGet, "/v1/swarms", nil, nil, &l)
}

// Stop stops the named containers, or all of the swarm without names.
func (c *Client) Stop(ctx context.Context, repoPath string, names []string) (api.SwarmView, error) {
	var v api.SwarmView
	return v, c.do(ctx, http.MethodPost, "/v1/swarms/stop", nil, api.StopRequest{RepoPath: repoPath, Names: names}, &v)
}

// Resume resumes the repo's swarm.
func (c *Client) Resume(ctx context.Context, repoPath string, retryFailed bool) (api.SwarmView, error) {
	var v api.SwarmView
	return v, c.do(ctx, http.MethodPost, "/v1/swarms/resume", nil, api.ResumeRequest{RepoPath: repoPath, RetryFailed: retryFailed}, &v)
}

// Fetch brings the unreceived branches of finished containers into the
// checkout.
func (c *Client) Fetch(ctx context.Context, repoPath string, names []string) (api.FetchReport, error) {
	var rep api.FetchReport
	return rep, c.do(ctx, http.MethodPost, "/v1/swarms/fetch", nil, api.FetchRequest{RepoPath: repoPath, Names: names}, &rep)
}

// Land lands the swarm's completed branches onto one integration branch.
func (c *Client) Land(ctx context.Context, req api.LandRequest) (api.LandReport, error) {
	var rep api.LandReport
	err := c.do(ctx, http.MethodPost, strings.TrimPrefix(api.RouteLand, http.MethodPost+" "), nil, req, &rep)
	return rep, err
}

// Pick makes the attempt name its task file's pick.
func (c *Client) Pick(ctx context.Context, repoPath, name string) (api.SwarmView, error) {
	var v api.SwarmView
	err := c.do(ctx, http.MethodPost, strings.TrimPrefix(api.RoutePick, http.MethodPost+" "), nil, api.PickRequest{RepoPath: repoPath, Name: name}, &v)
	return v, err
}

// Cleanup removes the swarm's finished containers.
func (c *Client) Cleanup(ctx context.Context, repoPath string, force bool) (api.CleanupReport, error) {
	var rep api.CleanupReport
	return rep, c.do(ctx, http.MethodPost, "/v1/swarms/cleanup", nil, api.CleanupRequest{RepoPath: repoPath, Force: force}, &rep)
}

// Logs calls fn for every journal record of the container req selects, in
// order; with Follow it keeps going until the container's journal ends (the
// daemon closes the stream), ctx ends, or fn returns an error (which Logs
// returns).
func (c *Client) Logs(ctx context.Context, req api.LogsRequest, fn func(state.Record) error) error {
	q := url.Values{"repo": {req.RepoPath}, "name": {req.Name}, "follow": {strconv.FormatBool(req.Follow)}}
	if req.Tail > 0 {
		q.Set("tail", strconv.Itoa(req.Tail))
	}
	if !req.Since.IsZero() {
		q.Set("since", req.Since.UTC().Format(time.RFC3339Nano))
	}
	if req.AfterSeq > 0 {
		q.Set("after", strconv.FormatInt(req.AfterSeq, 10))
	}
	return streamNDJSON(c, ctx, "/v1/swarms/logs", q, nil, fn)
}

// Events calls fn for every event (of repoPath's swarms only, when set)
// until ctx ends, the daemon stops, or fn returns an error.
func (c *Client) Events(ctx context.Context, repoPath string, fn func(api.Event) error) error {
	return c.EventsOpened(ctx, repoPath, nil, fn)
}

// EventsOpened is Events that also calls opened (when not nil) once the
// daemon has subscribed the stream: every event published after opened
// returns reaches fn. A caller that reads a state and then follows its
// changes opens first, so no change falls between the two.
func (c *Client) EventsOpened(ctx context.Context, repoPath string, opened func(), fn func(api.Event) error) error {
	var q url.Values
	if repoPath != "" {
		q = url.Values{"repo": {repoPath}}
	}
	return streamNDJSON(c, ctx, "/v1/events", q, opened, fn)
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := "http://aimid" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			if errors.Is(op.Err, fs.ErrPermission) {
				return nil, socketPermission(c.socket, op.Err)
			}
			return nil, &UnreachableError{Socket: c.socket, Err: op.Err}
		}
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		apiErr := &api.APIError{Status: resp.StatusCode}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxRequestBody))
		if json.Unmarshal(data, &apiErr.Body) != nil || apiErr.Body.Error == "" {
			apiErr.Body.Error = fmt.Sprintf("daemon answered HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
		}
		return nil, apiErr
	}
	return resp, nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	resp, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// streamNDJSON decodes one T per line, calling opened (when not nil) once
// the answer's head arrived: the daemon sends it after it subscribed. A
// generic function rather than a method: Go methods cannot have type
// parameters.
func streamNDJSON[T any](c *Client, ctx context.Context, path string, q url.Values, opened func(), fn func(T) error) error {
	resp, err := c.request(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if opened != nil {
		opened()
	}
	br := bufio.NewReaderSize(resp.Body, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var v T
			if jerr := json.Unmarshal(line, &v); jerr != nil {
				return fmt.Errorf("decode stream %s: %w", path, jerr)
			}
			if ferr := fn(v); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read stream %s: %w", path, err)
		}
	}
}
