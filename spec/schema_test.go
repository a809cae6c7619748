package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateState(t *testing.T) {
	valid := `{"swarmId":"6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b","createdAt":"2026-11-20T10:00:00Z","updatedAt":"2026-11-20T10:00:00Z","containers":[]}`
	if err := ValidateState([]byte(valid)); err != nil {
		t.Fatalf("a minimal valid file is refused: %v", err)
	}
	for name, doc := range map[string]string{
		"not JSON":      `{`,
		"extra field":   strings.Replace(valid, `"containers"`, `"extra":1,"containers"`, 1),
		"bad swarm id":  strings.Replace(valid, `6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b`, `nope`, 1),
		"bad timestamp": strings.Replace(valid, `2026-11-20T10:00:00Z","containers`, `yesterday","containers`, 1),
	} {
		if err := ValidateState([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestEmbeddedSchemaIsTheFileInTheRepository(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(".", "swarm-state.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(StateSchema()) {
		t.Fatal("embedded schema differs from spec/swarm-state.schema.json")
	}
}
