package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/cli"
	"github.com/aimi-tools/swarm/state"
)

// The resources' URIs.
const (
	StateURI      = "aimi://swarm/state"
	journalPrefix = "aimi://swarm/journal/"
	// JournalTemplate is every journal's URI: {name} a container's, or
	// land for the land journal.
	JournalTemplate = journalPrefix + "{name}"
)

// JournalURI is the URI of the journal of container name.
func JournalURI(name string) string { return journalPrefix + url.PathEscape(name) }

// Timing of the notifications.
const (
	// notifyGap gathers the changes of a burst (a story's progress moves
	// the state many times a second) into one notification per resource.
	notifyGap = 250 * time.Millisecond
	// reconnectMax is the longest wait before the event stream is asked
	// for again after the daemon went (it restarts, or was never up).
	reconnectMax = 10 * time.Second
)

// resources serves the state and the journals and tells subscribers when
// they change.
type resources struct {
	s       *Server
	mu      sync.Mutex
	known   map[string]bool // containers with a journal resource listed
	dirty   map[string]bool // URIs changed since the last notification
	changed chan struct{}   // a URI became dirty
}

func newResources(s *Server) *resources {
	return &resources{s: s, known: map[string]bool{}, dirty: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (r *resources) add() {
	r.s.mcp.AddResource(&mcp.Resource{URI: StateURI, Name: "swarm-state", Title: "Swarm state",
		Description: "The swarm's state file (.aimi/swarm-state.json) as the daemon reconciled it: each container's status and story progress. Subscribe to hear when it changes.",
		MIMEType:    "application/json"}, r.readState)
	r.s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: JournalTemplate, Name: "journal", Title: "Container journal",
		Description: fmt.Sprintf("The last %d records of a container's journal (land: the land journal), one line each. Subscribe to hear when it grows.", defaultTail),
		MIMEType:    "text/plain"}, r.readJournal)
}

// checkURI refuses a subscription to a URI the server does not serve.
func (r *resources) checkURI(uri string) error {
	if uri == StateURI {
		return nil
	}
	if name, ok := journalName(uri); ok && name != "" {
		return nil
	}
	return fmt.Errorf("%s is not a resource of aimi: subscribe to %s or %s", r.s.clean(uri), StateURI, JournalTemplate)
}

func journalName(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, journalPrefix)
	if !ok {
		return "", false
	}
	name, err := url.PathUnescape(rest)
	return name, err == nil
}

func (r *resources) readState(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var out limitBuffer
	if err := out.settle(cli.WriteStatusJSON(ctx, r.s.client, r.s.opts.Repo, &out, false)); err != nil {
		return nil, r.failed(err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: StateURI, MIMEType: "application/json", Text: out.String()}}}, nil
}

func (r *resources) readJournal(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, ok := journalName(uri)
	if !ok || name == "" {
		return nil, mcp.ResourceNotFoundError(r.s.clean(uri))
	}
	var out limitBuffer
	lr, err := cli.LogsRequest(r.s.opts.Repo, cli.LogsOptions{Name: name, Tail: defaultTail}, time.Now())
	if err == nil {
		err = cli.WriteLogs(ctx, r.s.client, lr, &out, false)
	}
	if err := out.settle(err); err != nil {
		return nil, r.failed(err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: out.String()}}}, nil
}

// failed is a read's error with the CLI's message, cleaned as answers are.
func (r *resources) failed(err error) error {
	return errors.New(r.s.clean(cli.DaemonError(err).Error()))
}

// saw lists a journal resource for every container of view not listed yet.
func (r *resources) saw(view api.SwarmView) {
	if view.State == nil {
		return
	}
	for _, c := range view.State.Containers {
		r.sawContainer(c.ContainerName)
	}
}

func (r *resources) sawContainer(name string) {
	if name == "" {
		return
	}
	r.mu.Lock()
	seen := r.known[name]
	r.known[name] = true
	r.mu.Unlock()
	if !seen {
		r.s.mcp.AddResource(&mcp.Resource{URI: JournalURI(name), Name: "journal-" + r.s.clean(name), Title: "Journal of " + r.s.clean(name),
			Description: "The last records of this container's journal.", MIMEType: "text/plain"}, r.readJournal)
	}
}

// mark notes that uris changed.
func (r *resources) mark(uris ...string) {
	r.mu.Lock()
	for _, u := range uris {
		r.dirty[u] = true
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// follow reads the daemon's events for the repository until ctx ends and
// notifies the subscribers of what they changed, reconnecting when the
// stream ends (a daemon restart) or no daemon answers.
func (r *resources) follow(ctx context.Context) {
	go r.notify(ctx)
	wait := time.Second
	for ctx.Err() == nil {
		// What changed while no stream was open is not in any event.
		if view, err := r.s.client.Status(ctx, r.s.opts.Repo); err == nil {
			r.saw(view)
			r.mark(StateURI)
		}
		err := r.s.client.Events(ctx, r.s.opts.Repo, func(e api.Event) error {
			wait = time.Second
			r.mark(StateURI)
			if e.ContainerName != "" {
				r.sawContainer(e.ContainerName)
				r.mark(JournalURI(e.ContainerName))
			}
			if e.Kind == api.EventLandProgress {
				r.mark(JournalURI(state.LandJournal))
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		r.s.opts.Logger.Debug("daemon event stream ended; asking again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, reconnectMax)
	}
}

// notify sends one resources/updated per dirty URI, at most every
// notifyGap.
func (r *resources) notify(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.changed:
		}
		r.mu.Lock()
		uris := make([]string, 0, len(r.dirty))
		for u := range r.dirty {
			uris = append(uris, u)
		}
		clear(r.dirty)
		r.mu.Unlock()
		for _, u := range uris {
			if err := r.s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: u}); err != nil {
				r.s.opts.Logger.Debug("notify resource updated", "uri", u, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyGap):
		}
	}
}
