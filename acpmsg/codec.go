package acpmsg

import (
	"bytes"
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
	d := decoder{s: scanner{data: data}}
	if d.s.peek() != '{' {
		return Message{}, nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	var m Message
	var has struct{ typ, ts, swarm, container bool }
	pStart, pEnd := -1, -1
	err := d.s.object(func(key string) error {
		var err error
		switch key {
		case "type":
			var v string
			v, has.typ, err = d.str("type")
			m.Type = Type(v)
		case "timestamp":
			m.Timestamp, has.ts, err = d.str("timestamp")
		case "swarmId":
			m.SwarmID, has.swarm, err = d.str("swarmId")
		case "containerId":
			m.ContainerID, has.container, err = d.str("containerId")
		case "payload":
			pStart = d.s.pos
			err = d.s.skip(0)
			pEnd = d.s.pos
		default:
			err = d.s.skip(0)
		}
		return err
	})
	if err == nil {
		err = d.s.end()
	}
	if err != nil {
		return Message{}, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	d.require("type", has.typ)
	d.require("timestamp", has.ts)
	d.require("swarmId", has.swarm)
	d.require("containerId", has.container)
	if pStart < 0 || string(data[pStart:pEnd]) == "null" {
		d.require("payload", false)
		return m, d.fields, nil
	}
	if !knownType(m.Type) {
		if m.Type != "" {
			d.fields = append(d.fields, FieldError{Field: "type", Rule: "msgtype", Value: cut(string(m.Type)), Message: ruleMessages["msgtype"]})
		}
		return m, d.fields, nil
	}
	if data[pStart] != '{' {
		d.fields = append(d.fields, FieldError{Field: "payload", Rule: "type", Value: (&scanner{data: data[pStart:pEnd]}).kindAt(), Message: "must be an object"})
		return m, d.fields, nil
	}
	pd := decoder{s: scanner{data: data[pStart:pEnd]}, fields: d.fields}
	m.Payload, err = pd.payload(m.Type)
	if err != nil { // the bytes were checked by skip, so this is a bug
		return Message{}, nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	return m, pd.fields, nil
}

// decoder collects field errors while reading values with a scanner.
type decoder struct {
	s      scanner
	fields []FieldError
}

// str reads a string value; any other kind is a type error on field (and
// present is false so that no "required" error follows).
func (d *decoder) str(field string) (v string, present bool, err error) {
	if d.s.peek() == '"' {
		v, err = d.s.str()
		return v, err == nil, err
	}
	d.typeErr(field, "must be a string")
	return "", false, d.s.skip(0)
}

func (d *decoder) typeErr(field, msg string) {
	d.fields = append(d.fields, FieldError{Field: field, Rule: "type", Value: d.s.kindAt(), Message: msg})
}

// require records a missing key, unless the key was present with a wrong
// type (already reported).
func (d *decoder) require(field string, present bool) {
	if !present && !hasField(d.fields, field) {
		d.fields = append(d.fields, FieldError{Field: field, Rule: "required", Message: "is required"})
	}
}

func (d *decoder) payload(t Type) (Payload, error) {
	switch t {
	case TypeTaskRequest:
		p := &TaskRequest{}
		err := d.strObject([]strField{
			{key: "taskFilePath", field: "payload.taskFilePath", dst: &p.TaskFilePath},
			{key: "branchName", field: "payload.branchName", dst: &p.BranchName},
			{key: "repoUrl", field: "payload.repoUrl", dst: &p.RepoURL},
		}, func(key string) (bool, error) {
			var err error
			switch key {
			case "envVars":
				p.EnvVars, err = d.envVars()
			case "branchExists":
				p.BranchExists, err = d.optionalBool()
			default:
				return false, nil
			}
			return true, err
		})
		if p.EnvVars == nil {
			p.EnvVars = map[string]string{} // the spec's default
		}
		return p, err
	case TypeProgressUpdate:
		p := &ProgressUpdate{}
		err := d.strObject([]strField{
			{key: "storyId", field: "payload.storyId", dst: &p.StoryID},
			{key: "status", field: "payload.status", dst: &p.Status},
			{key: "output", field: "payload.output", dst: &p.Output},
		}, nil)
		return p, err
	case TypeCompletion:
		p := &Completion{}
		var has struct{ status, prURL bool }
		err := d.s.object(func(key string) error {
			var err error
			switch key {
			case "status":
				p.Status, has.status, err = d.str("payload.status")
			case "prUrl":
				if d.s.peek() == 'n' {
					p.PRURL, has.prURL = nil, true
					return d.s.literal("null")
				}
				var v string
				if v, has.prURL, err = d.str("payload.prUrl"); has.prURL {
					p.PRURL = &v
				}
			case "errors":
				p.Errors, err = d.errorList()
			default:
				err = d.s.skip(0)
			}
			return err
		})
		d.require("payload.status", has.status)
		if !has.prURL && !hasField(d.fields, "payload.prUrl") {
			d.fields = append(d.fields, FieldError{Field: "payload.prUrl", Rule: "required", Message: "is required (null when there is no PR)"})
		}
		if p.Errors == nil && !hasField(d.fields, "payload.errors") {
			d.fields = append(d.fields, FieldError{Field: "payload.errors", Rule: "required", Message: "is required (an empty list when there are none)"})
		}
		return p, err
	default: // TypeError
		p := &ErrorPayload{}
		err := d.strObject([]strField{
			{key: "code", field: "payload.code", dst: &p.Code},
			{key: "message", field: "payload.message", dst: &p.Message},
		}, nil)
		return p, err
	}
}

// strField is a required string key of a payload object.
type strField struct {
	key   string  // the JSON key
	field string  // its name in field errors
	dst   *string // where its value goes
	has   bool
}

// strObject reads an object whose keys in fields are required strings.
// Other keys go to other, when given, which says whether it took the key;
// the rest are skipped.
func (d *decoder) strObject(fields []strField, other func(key string) (bool, error)) error {
	err := d.s.object(func(key string) error {
		for i := range fields {
			if fields[i].key == key {
				var err error
				*fields[i].dst, fields[i].has, err = d.str(fields[i].field)
				return err
			}
		}
		if other != nil {
			if took, err := other(key); took {
				return err
			}
		}
		return d.s.skip(0)
	})
	for _, f := range fields {
		d.require(f.field, f.has)
	}
	return err
}

// optionalBool reads a boolean of an optional extension key: anything
// else (null, another kind) counts as absent and is no field error, as an
// unknown key would not be.
func (d *decoder) optionalBool() (*bool, error) {
	var v bool
	switch d.s.peek() {
	case 't':
		v = true
		if err := d.s.literal("true"); err != nil {
			return nil, err
		}
	case 'f':
		if err := d.s.literal("false"); err != nil {
			return nil, err
		}
	default:
		return nil, d.s.skip(0)
	}
	return &v, nil
}

// envVars reads an object of strings; null counts as absent.
func (d *decoder) envVars() (map[string]string, error) {
	switch d.s.peek() {
	case 'n':
		return nil, d.s.literal("null")
	case '{':
	default:
		d.typeErr("payload.envVars", "must be an object of strings")
		return nil, d.s.skip(0)
	}
	env := map[string]string{}
	err := d.s.object(func(key string) error {
		v, ok, err := d.str("payload.envVars[" + key + "]")
		if ok {
			env[key] = v
		}
		return err
	})
	return env, err
}

// errorList reads an array of strings; null stays nil (and is then reported
// as missing).
func (d *decoder) errorList() ([]string, error) {
	switch d.s.peek() {
	case 'n':
		return nil, d.s.literal("null")
	case '[':
	default:
		d.typeErr("payload.errors", "must be an array of strings")
		return nil, d.s.skip(0)
	}
	list := []string{}
	err := d.s.array(func() error {
		v, _, err := d.str(fmt.Sprintf("payload.errors[%d]", len(list)))
		list = append(list, v)
		return err
	})
	return list, err
}
