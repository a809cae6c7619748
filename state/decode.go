package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Reading is lenient where the aimi shell tools are loose: they build the
// file with jq and shell variables, so an integer may arrive as a string
// ("12"), and an unset prUrl or acpPid as "" instead of null. Such values
// are read as what they mean; anything else of the wrong type is an error
// naming the field (containers[0].acpPid), so the user knows what to fix.
// Writing is always strict (see MarshalJSON).

// fieldError is a value of one field that cannot be read.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// at prefixes an error, or each error of a joined one, with the field it
// happened in.
func at(field string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, at(field, e))
		}
		return errors.Join(errs...)
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return &fieldError{field: field + "." + fe.field, err: fe.err}
	}
	return &fieldError{field: field, err: err}
}

// atIndex is at for an array element.
func atIndex(field string, i int, err error) error {
	return at(fmt.Sprintf("%s[%d]", field, i), err)
}

// fields splits an object into its members; a duplicate key keeps the last
// value, as encoding/json does.
func fields(b []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("is not an object")
	}
	if m == nil {
		return nil, errors.New("is null, not an object")
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// readString reads a string member; absent or null is "".
func readString(m map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil
	}
	if s, ok := plainString(raw); ok {
		*dst = s
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return at(key, fmt.Errorf("%s is not a string", clip(raw)))
	}
	return nil
}

// plainString reads a JSON string that has no escapes: its bytes are the
// value, as json.Unmarshal would give it. Almost every string of a state
// is one, and json.Unmarshal per field was a fifth of reading a state of
// 200 containers. ok is false for anything else (json.Unmarshal decides).
func plainString(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(in), true
}

// readTime reads an RFC 3339 member; absent or null is the zero time.
func readTime(m map[string]json.RawMessage, key string, dst *time.Time) error {
	var s string
	if err := readString(m, key, &s); err != nil || s == "" {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return at(key, fmt.Errorf("%q is not an RFC 3339 time", s))
	}
	*dst = t.UTC()
	return nil
}

// looseInt reads an integer written as a JSON number or as a string of
// decimal digits. ok is false for null and "".
func looseInt(raw json.RawMessage) (n int, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return 0, false, nil
	}
	text := string(raw)
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, false, fmt.Errorf("%s is not an integer", clip(raw))
		}
		text = strings.TrimSpace(text)
		if text == "" || text == "null" {
			return 0, false, nil
		}
	}
	if v, err := strconv.Atoi(text); err == nil {
		return v, true, nil
	}
	// A JSON number such as 12.0 or 1e2 that is integral.
	if f, err := strconv.ParseFloat(text, 64); err == nil && f == float64(int(f)) && f >= -1<<53 && f <= 1<<53 {
		return int(f), true, nil
	}
	return 0, false, fmt.Errorf("%s is not an integer", clip(raw))
}

// readInt reads a required-or-zero integer member.
func readInt(m map[string]json.RawMessage, key string, dst *int) error {
	raw, ok := m[key]
	if !ok {
		return nil
	}
	n, _, err := looseInt(raw)
	if err != nil {
		return at(key, err)
	}
	*dst = n
	return nil
}

// clip shows a raw JSON value in an error message: as written (a string
// keeps its quotes), on one line, bounded, with anything but printable
// ASCII escaped: the file may hold anything, and the message reaches a
// terminal.
func clip(raw json.RawMessage) string {
	const max = 40
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// decodeSwarm reads a state file's top-level object.
func decodeSwarm(b []byte, sw *Swarm) error {
	m, err := fields(b)
	if err != nil {
		return err
	}
	var out Swarm
	errs := []error{
		readString(m, "swarmId", &out.SwarmID),
		readTime(m, "createdAt", &out.CreatedAt),
		readTime(m, "updatedAt", &out.UpdatedAt),
	}
	if raw, ok := m["containers"]; ok && !isNull(raw) {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			errs = append(errs, at("containers", errors.New("is not an array")))
		}
		for i, it := range items {
			if isNull(it) {
				errs = append(errs, atIndex("containers", i, errors.New("is null")))
				continue
			}
			c := &Container{}
			if err := decodeContainer(it, c); err != nil {
				errs = append(errs, atIndex("containers", i, err))
				continue
			}
			out.Containers = append(out.Containers, c)
		}
	}
	errs = append(errs, decodeAttempts(m, &out), decodeLand(m, &out))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*sw = out
	return nil
}

// decodeContainer reads one entry of containers.
func decodeContainer(b []byte, c *Container) error {
	m, err := fields(b)
	if err != nil {
		return err
	}
	var out Container
	var status string
	errs := []error{
		readString(m, "containerId", &out.ContainerID),
		readString(m, "containerName", &out.ContainerName),
		readString(m, "taskFilePath", &out.TaskFilePath),
		readString(m, "branchName", &out.BranchName),
		readString(m, "status", &status),
		readTime(m, "createdAt", &out.CreatedAt),
		readTime(m, "updatedAt", &out.UpdatedAt),
	}
	out.Status = ContainerStatus(status)
	var pr string
	if err := readString(m, "prUrl", &pr); err != nil {
		errs = append(errs, err)
	} else if pr != "" {
		out.PRURL = &pr
	}
	if raw, ok := m["acpPid"]; ok {
		n, set, err := looseInt(raw)
		if err != nil {
			errs = append(errs, at("acpPid", err))
		} else if set {
			out.ACPPID = &n
		}
	}
	if raw, ok := m["storyProgress"]; ok && !isNull(raw) {
		errs = append(errs, at("storyProgress", decodeProgress(raw, &out.StoryProgress)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*c = out
	return nil
}

func decodeProgress(b []byte, p *Progress) error {
	m, err := fields(b)
	if err != nil {
		return err
	}
	return errors.Join(
		readInt(m, "total", &p.Total),
		readInt(m, "completed", &p.Completed),
		readInt(m, "failed", &p.Failed),
		readInt(m, "inProgress", &p.InProgress),
		readInt(m, "pending", &p.Pending),
	)
}
