package board

import (
	"encoding/json"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/state"
)

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
	case rec.Stream == state.StreamStderr:
		l.Kind, l.Text = "log", clean(string(rec.RawLine()), maxText)
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
