package spec

import (
	"bytes"
	_ "embed"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// stateSchema is the JSON Schema of .aimi/swarm-state.json, the file the
// daemon shares with the older aimi shell tools.
//
//go:embed swarm-state.schema.json
var stateSchema []byte

// stateSchemaURL names the embedded schema inside the compiler; it is never
// fetched.
const stateSchemaURL = "file:///aimi/spec/swarm-state.schema.json"

// StateSchema returns a copy of the swarm-state.json JSON Schema.
func StateSchema() []byte { return bytes.Clone(stateSchema) }

// CompileStateSchema compiles the embedded schema with format assertions on
// (date-time and uuid are checked, as the shell tools expect them).
func CompileStateSchema() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(stateSchema))
	if err != nil {
		return nil, fmt.Errorf("parse embedded state schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(stateSchemaURL, doc); err != nil {
		return nil, fmt.Errorf("load embedded state schema: %w", err)
	}
	sch, err := c.Compile(stateSchemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile embedded state schema: %w", err)
	}
	return sch, nil
}

// ValidateState checks the bytes of a swarm-state.json against the schema
// and says where it departs from it.
func ValidateState(data []byte) error {
	sch, err := CompileStateSchema()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("swarm-state.json is not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("swarm-state.json does not match spec/swarm-state.schema.json: %w", err)
	}
	return nil
}
