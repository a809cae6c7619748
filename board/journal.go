package board

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/internal/ctxutil"
	"github.com/aimi-tools/swarm/state"
)

// journalPage is how many of a journal's last records the view shows: the
// page keeps as many lines. A journal at its cap holds about a million, and
// the daemon reads only these from its end.
const journalPage = 2000

// journal streams one container's journal as "line" events (id = the
// record's seq, so a reconnect resumes after the last line shown) and an
// "end" event when the daemon ends it (the container is done). It starts
// with the last journalPage records (after the last one shown, on a
// reconnect), and says how many earlier ones it left to `aimi swarm logs`.
func (s *Server) journal(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	repo, name := q.Get("repo"), q.Get("name")
	if repo == "" || name == "" {
		writeJSON(w, http.StatusBadRequest, errorAnswer{Error: "give repo and name", Code: "invalid_request"})
		return
	}
	if !s.repoOK(w, repo) {
		return
	}
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			after = n
		}
	}
	ctx, cancel := ctxutil.WithDone(r.Context(), s.done) // ends with the request or the server
	defer cancel()
	out, ok := newSSE(w)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	first := true
	req := api.LogsRequest{RepoPath: repo, Name: name, Follow: true, Tail: journalPage, AfterSeq: after}
	err := s.opts.Daemon.Logs(ctx, req, func(rec state.Record) error {
		if rec.Seq <= after {
			return nil
		}
		if first && rec.Seq > after+1 {
			if err := out.send("line", "", earlierNote(rec.Seq-after-1, name)); err != nil {
				return err
			}
		}
		first = false
		return out.send("line", strconv.FormatInt(rec.Seq, 10), summarize(rec))
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		// The stream has answered 200 already; the page shows this.
		_ = out.send("failed", "", errorAnswer{Error: clean(err.Error(), maxText)})
	default:
		_ = out.send("end", "", struct{}{})
	}
}

// earlierNote is the line that stands for the n records before the page.
func earlierNote(n int64, name string) lineJSON {
	return lineJSON{Stream: state.StreamDaemon, Kind: "gap",
		Text: clean(fmt.Sprintf("%d earlier records not shown: 'aimi swarm logs %s' prints them all", n, name), maxText)}
}

// lineJSON is one journal record as the page shows it.
type lineJSON struct {
	Seq    int64  `json:"seq"`
	Time   string `json:"time"`
	Stream string `json:"stream"` // stdout | stderr | daemon
	// Kind: message (valid, folded), rejected (valid, refused by the
	// fold), invalid (not a message), log (stderr), gap (lines the
	// journal's cap left out).
	Kind string `json:"kind"`
	Type string `json:"type,omitempty"`
	// Code is an error code (error messages, and the daemon's own).
	Code string `json:"code,omitempty"`
	Text string `json:"text"`
	// Note says why a line was rejected or invalid.
	Note string `json:"note,omitempty"`
}

// summarize turns a journal record (untrusted: its raw line and message
// came from a container) into one bounded, control-free line.
func summarize(rec state.Record) lineJSON {
	l := lineJSON{Seq: rec.Seq, Stream: rec.Stream, Type: clean(rec.Type, maxTitle)}
	if !rec.Time.IsZero() {
		l.Time = rec.Time.UTC().Format("15:04:05.000")
	}
	switch {
	case rec.Omitted != nil:
		// The journal's cap: what the daemon left out, in its words.
		l.Kind, l.Text = "gap", clean(rec.Reason, maxText)
		return l
	case rec.Usage != nil:
		u := rec.Usage
		l.Kind, l.Text = "usage", clean(fmt.Sprintf("%s %d: %d in, %d out, %d cache read, %d cache write; cost %.4f",
			u.Provider, u.Status, u.Usage.Input, u.Usage.Output, u.Usage.CacheRead, u.Usage.CacheWrite, u.Cost), maxText)
		return l
	case rec.Stream == state.StreamStderr:
		l.Kind, l.Text = "log", clean(string(rec.RawLine()), maxText)
		return l
	case rec.Stream == state.StreamDaemon && rec.Reason == string(api.EventLimitWait):
		// A container's model calls began or ended waiting at the gateway.
		l.Kind, l.Text = "limit-wait", clean(string(rec.RawLine()), maxText)
		return l
	case rec.Stream == state.StreamDaemon && rec.Type == state.TypeEgressDenied:
		// A request the egress proxy refused: method, host:port, why.
		l.Kind, l.Text = state.TypeEgressDenied, clean(rec.Reason, maxText)
		return l
	case rec.Stream == state.StreamDaemon && rec.Type == state.TypeGitRefused:
		// A request the git service refused, in its words.
		l.Kind, l.Text = state.TypeGitRefused, clean(rec.Reason, maxText)
		return l
	case !rec.Valid:
		l.Kind, l.Text, l.Note = "invalid", clean(string(rec.RawLine()), maxText), clean(rec.Reason, maxText)
		return l
	case rec.Rejected != "":
		l.Kind, l.Note = "rejected", clean(rec.Rejected, maxText)
	default:
		l.Kind = "message"
	}
	l.Text = messageText(rec.Message, &l)
	return l
}

// messageText says what a message says, in a line. The payload is decoded
// by type with no validation beyond JSON: the journal holds validated
// messages, and whatever a record holds is only shown, bounded.
func messageText(raw json.RawMessage, l *lineJSON) string {
	var env struct {
		Type    acpmsg.Type     `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &env) != nil {
		return ""
	}
	if l.Type == "" {
		l.Type = clean(string(env.Type), maxTitle)
	}
	switch env.Type {
	case acpmsg.TypeProgressUpdate:
		var p acpmsg.ProgressUpdate
		if json.Unmarshal(env.Payload, &p) == nil {
			return clean(p.StoryID+" "+p.Status+": "+p.Output, maxText)
		}
	case acpmsg.TypeError:
		var p acpmsg.ErrorPayload
		if json.Unmarshal(env.Payload, &p) == nil {
			l.Code = clean(p.Code, maxTitle)
			return clean(p.Message, maxText)
		}
	case acpmsg.TypeCompletion:
		var p acpmsg.Completion
		if json.Unmarshal(env.Payload, &p) == nil {
			t := "completion " + p.Status
			if p.PRURL != nil {
				t += " " + *p.PRURL
			}
			for _, e := range p.Errors {
				t += "; " + e
			}
			return clean(t, maxText)
		}
	case acpmsg.TypeTaskRequest:
		// Its env vars are not shown: the journal keeps them, the board
		// has no need to.
		var p acpmsg.TaskRequest
		if json.Unmarshal(env.Payload, &p) == nil {
			return clean("task-request "+p.TaskFilePath+" on "+p.BranchName, maxText)
		}
	}
	return clean(string(env.Type), maxTitle)
}
