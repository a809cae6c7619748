package acpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Line-level problems: the line is not a single JSON object at all. They are
// returned wrapped with details; test with errors.Is.
var (
	ErrLineTooLong = errors.New("line exceeds 64 KiB")
	ErrInvalidUTF8 = errors.New("line is not valid UTF-8")
	ErrEmptyLine   = errors.New("empty line")
	ErrMalformed   = errors.New("line is not exactly one JSON object")
)

// The wire shapes use pointers and raw values so that the decoder can tell a
// missing key from a zero value: the spec requires keys (output, prUrl,
// errors) whose zero value is valid.
type wireEnvelope struct {
	Type        *string         `json:"type"`
	Timestamp   *string         `json:"timestamp"`
	SwarmID     *string         `json:"swarmId"`
	ContainerID *string         `json:"containerId"`
	Payload     json.RawMessage `json:"payload"`
}

type wireTaskRequest struct {
	TaskFilePath *string           `json:"taskFilePath"`
	BranchName   *string           `json:"branchName"`
	RepoURL      *string           `json:"repoUrl"`
	EnvVars      map[string]string `json:"envVars"`
}

type wireProgressUpdate struct {
	StoryID *string `json:"storyId"`
	Status  *string `json:"status"`
	Output  *string `json:"output"`
}

type wireCompletion struct {
	Status *string         `json:"status"`
	PRURL  json.RawMessage `json:"prUrl"` // nil: missing; "null": no PR
	Errors []string        `json:"errors"`
}

type wireError struct {
	Code    *string `json:"code"`
	Message *string `json:"message"`
}

// Parse decodes and validates one NDJSON line (a trailing newline is
// allowed). The line must be at most MaxLineBytes, valid UTF-8 and exactly one
// JSON object. On a validation error the returned Message holds whatever
// could be decoded (Type in particular) and the error is a *ValidationError;
// line-level problems wrap ErrLineTooLong, ErrInvalidUTF8, ErrEmptyLine or
// ErrMalformed.
func Parse(line []byte) (Message, error) {
	m, fields, err := decode(line)
	if err != nil {
		return m, err
	}
	return m, asError(m.check(fields))
}

// ParseFromContainer is Parse for the orchestrator's side: a container never
// sends a task-request, so one is a direction error.
func ParseFromContainer(line []byte) (Message, error) {
	m, fields, err := decode(line)
	if err != nil {
		return m, err
	}
	fields = m.check(fields)
	if m.Type == TypeTaskRequest {
		fields = append([]FieldError{{Field: "type", Rule: "direction", Value: string(m.Type),
			Message: "a container never sends a task-request"}}, fields...)
	}
	return m, asError(fields)
}

// ParseTaskRequest is Parse for the runner's side: the only message a
// container receives is a task-request.
func ParseTaskRequest(line []byte) (Message, *TaskRequest, error) {
	m, fields, err := decode(line)
	if err != nil {
		return m, nil, err
	}
	fields = m.check(fields)
	if knownType(m.Type) && m.Type != TypeTaskRequest {
		fields = append([]FieldError{{Field: "type", Rule: "direction", Value: string(m.Type),
			Message: "a container only receives task-request messages"}}, fields...)
	}
	if err := asError(fields); err != nil {
		return m, nil, err
	}
	return m, m.Payload.(*TaskRequest), nil
}

// UnmarshalJSON decodes a message without applying the spec's rules (use
// Parse or Validate for that). It fails on malformed JSON, an unknown or
// missing type, missing keys and mistyped values.
func (m *Message) UnmarshalJSON(data []byte) error {
	dm, fields, err := decodeJSON(data)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		return &ValidationError{Fields: fields}
	}
	*m = dm
	return nil
}

// decode runs the line-level checks, then decodeJSON.
func decode(line []byte) (Message, []FieldError, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > MaxLineBytes {
		return Message{}, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrLineTooLong, len(line), MaxLineBytes)
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return Message{}, nil, ErrEmptyLine
	}
	if !utf8.Valid(line) {
		return Message{}, nil, ErrInvalidUTF8
	}
	return decodeJSON(line)
}

// decodeJSON decodes an envelope and its payload. The error return is for
// data that is not one JSON object; everything else (missing keys, wrong
// types, unknown type) comes back as field errors.
func decodeJSON(data []byte) (Message, []FieldError, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Message{}, nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	var w wireEnvelope
	var fields []FieldError
	if err := json.Unmarshal(data, &w); err != nil {
		fe, ok := typeError(err, "")
		if !ok {
			return Message{}, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		fields = append(fields, fe)
	}
	var m Message
	fields = need(fields, "type", w.Type, (*string)(&m.Type))
	fields = need(fields, "timestamp", w.Timestamp, &m.Timestamp)
	fields = need(fields, "swarmId", w.SwarmID, &m.SwarmID)
	fields = need(fields, "containerId", w.ContainerID, &m.ContainerID)
	if len(w.Payload) == 0 || string(w.Payload) == "null" {
		if !hasField(fields, "payload") {
			fields = append(fields, FieldError{Field: "payload", Rule: "required", Message: "is required"})
		}
		return m, fields, nil
	}
	if !knownType(m.Type) {
		if m.Type != "" {
			fields = append(fields, FieldError{Field: "type", Rule: "msgtype", Value: cut(string(m.Type)), Message: ruleMessages["msgtype"]})
		}
		return m, fields, nil
	}
	if w.Payload[0] != '{' {
		return m, append(fields, FieldError{Field: "payload", Rule: "type", Message: "must be a JSON object"}), nil
	}
	m.Payload, fields = decodePayload(m.Type, w.Payload, fields)
	return m, fields, nil
}

func decodePayload(t Type, raw json.RawMessage, fields []FieldError) (Payload, []FieldError) {
	unmarshal := func(v any) {
		if err := json.Unmarshal(raw, v); err != nil {
			fe, ok := typeError(err, "payload.")
			if !ok {
				fe = FieldError{Field: "payload", Rule: "json", Message: err.Error()}
			}
			fields = append(fields, fe)
		}
	}
	switch t {
	case TypeTaskRequest:
		var w wireTaskRequest
		unmarshal(&w)
		p := &TaskRequest{EnvVars: w.EnvVars}
		fields = need(fields, "payload.taskFilePath", w.TaskFilePath, &p.TaskFilePath)
		fields = need(fields, "payload.branchName", w.BranchName, &p.BranchName)
		fields = need(fields, "payload.repoUrl", w.RepoURL, &p.RepoURL)
		if p.EnvVars == nil {
			p.EnvVars = map[string]string{} // the spec's default
		}
		return p, fields
	case TypeProgressUpdate:
		var w wireProgressUpdate
		unmarshal(&w)
		p := &ProgressUpdate{}
		fields = need(fields, "payload.storyId", w.StoryID, &p.StoryID)
		fields = need(fields, "payload.status", w.Status, &p.Status)
		fields = need(fields, "payload.output", w.Output, &p.Output)
		return p, fields
	case TypeCompletion:
		var w wireCompletion
		unmarshal(&w)
		p := &Completion{Errors: w.Errors}
		fields = need(fields, "payload.status", w.Status, &p.Status)
		switch {
		case len(w.PRURL) == 0:
			if !hasField(fields, "payload.prUrl") {
				fields = append(fields, FieldError{Field: "payload.prUrl", Rule: "required", Message: "is required (null when there is no PR)"})
			}
		case string(w.PRURL) != "null":
			var s string
			if err := json.Unmarshal(w.PRURL, &s); err != nil {
				fields = append(fields, FieldError{Field: "payload.prUrl", Rule: "type", Message: "must be a string or null"})
			} else {
				p.PRURL = &s
			}
		}
		if p.Errors == nil && !hasField(fields, "payload.errors") {
			fields = append(fields, FieldError{Field: "payload.errors", Rule: "required", Message: "is required (an empty list when there are none)"})
		}
		return p, fields
	default: // TypeError
		var w wireError
		unmarshal(&w)
		p := &ErrorPayload{}
		fields = need(fields, "payload.code", w.Code, &p.Code)
		fields = need(fields, "payload.message", w.Message, &p.Message)
		return p, fields
	}
}

// need copies a present value into dst or records the key as missing.
func need(fields []FieldError, field string, v *string, dst *string) []FieldError {
	if v != nil {
		*dst = *v
		return fields
	}
	if hasField(fields, field) { // present with a wrong type
		return fields
	}
	return append(fields, FieldError{Field: field, Rule: "required", Message: "is required"})
}

// typeError turns a json type mismatch into a field error.
func typeError(err error, prefix string) (FieldError, bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return FieldError{}, false
	}
	field := prefix + te.Field
	if te.Field == "" {
		field = prefix + "<root>"
	}
	want := "a string"
	switch te.Type.Kind().String() {
	case "map", "struct":
		want = "an object"
	case "slice":
		want = "an array"
	}
	if te.Type.String() == "json.RawMessage" {
		want = "an object"
	}
	return FieldError{Field: field, Rule: "type", Value: te.Value, Message: "must be " + want}, true
}
