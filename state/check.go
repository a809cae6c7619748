package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Keys of the schema at each level: every allowed key, the required ones
// first (spec/swarm-state.schema.json).
var (
	swarmKeys     = []string{"swarmId", "createdAt", "updatedAt", "containers", "attempts", "land"}
	swarmRequired = 4
	containerKeys = []string{"containerId", "containerName", "taskFilePath", "branchName", "status",
		"storyProgress", "createdAt", "updatedAt", "prUrl", "acpPid"}
	containerRequired = 8
	progressKeys      = []string{"total", "completed", "failed", "inProgress", "pending"}
	progressRequired  = 5
)

// CheckFile reports whether the bytes are a state file of exactly the
// schema's shape: the keys of every object (none missing, none extra), the
// types, and everything Validate checks. `aimi swarm status --json` uses it
// so that what it prints is known to be valid; it mirrors the schema without
// a JSON Schema engine (tests check it against the schema itself).
func CheckFile(b []byte) error {
	sw, err := Decode(b)
	if err != nil {
		return err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("not a swarm state: %w", err)
	}
	errs := []error{checkKeys("swarm", top, swarmKeys, swarmRequired)}
	if bytes.Equal(bytes.TrimSpace(top["containers"]), []byte("null")) {
		errs = append(errs, errors.New("containers is null, not an array"))
	}
	var cs []map[string]json.RawMessage
	if raw, ok := top["containers"]; ok {
		if err := json.Unmarshal(raw, &cs); err != nil {
			errs = append(errs, fmt.Errorf("containers: %w", err))
		}
	}
	for i, c := range cs {
		where := fmt.Sprintf("containers[%d]", i)
		errs = append(errs, checkKeys(where, c, containerKeys, containerRequired))
		var p map[string]json.RawMessage
		if raw, ok := c["storyProgress"]; ok {
			if err := json.Unmarshal(raw, &p); err != nil {
				errs = append(errs, fmt.Errorf("%s.storyProgress: %w", where, err))
			}
			errs = append(errs, checkKeys(where+".storyProgress", p, progressKeys, progressRequired))
			for k, v := range p {
				if !isJSONInteger(v) {
					errs = append(errs, fmt.Errorf("%s.storyProgress.%s is %s, not an integer", where, k, clip(v)))
				}
			}
		}
		if raw, ok := c["acpPid"]; ok && !isNull(raw) && !isJSONInteger(raw) {
			errs = append(errs, fmt.Errorf("%s.acpPid is %s, not an integer or null", where, clip(raw)))
		}
		if raw, ok := c["prUrl"]; ok && !isNull(raw) && bytes.Equal(bytes.TrimSpace(raw), []byte(`""`)) {
			errs = append(errs, fmt.Errorf("%s.prUrl is \"\", not a URI or null", where))
		}
	}
	errs = append(errs, sw.Validate())
	return errors.Join(errs...)
}

// isJSONInteger reports whether raw is a JSON number without fraction or
// exponent (Decode also reads integers written as strings; the schema does
// not).
func isJSONInteger(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.ContainsAny(raw, ".eE") {
		return false
	}
	c := raw[0]
	return c == '-' || (c >= '0' && c <= '9')
}

func checkKeys(where string, obj map[string]json.RawMessage, allowed []string, required int) error {
	var errs []error
	for _, k := range allowed[:required] {
		if _, ok := obj[k]; !ok {
			errs = append(errs, fmt.Errorf("%s: %s is missing", where, k))
		}
	}
	for k, v := range obj {
		if !slices.Contains(allowed, k) {
			errs = append(errs, fmt.Errorf("%s: %s is not a field of the schema", where, k))
		} else if k != "prUrl" && k != "acpPid" && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			errs = append(errs, fmt.Errorf("%s: %s is null", where, k))
		}
	}
	return errors.Join(errs...)
}
