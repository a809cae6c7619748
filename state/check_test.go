package state

import (
	"strings"
	"testing"
)

// TestCheckFileAgreesWithTheSchema runs CheckFile and the JSON Schema engine
// over the same files: a valid one and mutations of it.
func TestCheckFileAgreesWithTheSchema(t *testing.T) {
	sch := compileSchema(t)
	valid := `{"swarmId":"6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b","createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z","containers":[{"containerId":"abc000abc000","containerName":"a","taskFilePath":"t.json","branchName":"feat/a","status":"running","prUrl":null,"storyProgress":{"total":2,"completed":1,"failed":0,"inProgress":1,"pending":0},"createdAt":"2026-11-22T10:31:00Z","updatedAt":"2026-11-22T10:31:00Z","acpPid":7}]}`
	cases := []struct{ name, old, new string }{
		{"valid file", "", ""},
		{"without the optional fields", `"prUrl":null,`, ``},
		{"extra top-level field", `"containers":`, `"extra":1,"containers":`},
		{"extra container field", `"status":"running"`, `"status":"running","exitCode":0`},
		{"extra progress field", `"pending":0`, `"pending":0,"skipped":1`},
		{"missing updatedAt", `"updatedAt":"2026-11-22T10:31:00Z","containers"`, `"containers"`},
		{"missing storyProgress key", `"failed":0,`, ``},
		{"null containers", `"containers":[{`, `"containers":null,"x":[{`},
		{"null task file path", `"taskFilePath":"t.json"`, `"taskFilePath":null`},
		{"string acpPid", `"acpPid":7`, `"acpPid":"7"`},
		{"zero acpPid", `"acpPid":7`, `"acpPid":0`},
		{"negative counter", `"total":2`, `"total":-2`},
		{"bad status", `"running"`, `"done"`},
		{"bad container id", `"abc000abc000"`, `"ABC000ABC000"`},
		{"bad date", `"createdAt":"2026-11-22T10:31:00Z","updatedAt"`, `"createdAt":"yesterday","updatedAt"`},
		{"prUrl not a URI", `"prUrl":null`, `"prUrl":"not a uri"`},
		{"with the attempts section", `"containers":`, `"attempts":[{"taskFilePath":"t.json","branchName":"feat/a","attempts":[]}],"containers":`},
		{"with the land section", `"containers":`, `"land":{"branch":"aimi/land/6f1c2a3b","onto":"main","results":[{"container":"a","taskFile":"t.json","branch":"feat/a","outcome":"landed","tip":"abc","merge":"def","verify":"passed"}],"updated":"2026-11-22T10:31:00Z"},"containers":`},
		{"null land", `"containers":`, `"land":null,"containers":`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := valid
			if tc.old != "" {
				if !strings.Contains(doc, tc.old) {
					t.Fatalf("mutation %q not applicable", tc.old)
				}
				doc = strings.Replace(doc, tc.old, tc.new, 1)
			}
			schemaErr := validateState(sch, []byte(doc))
			checkErr := CheckFile([]byte(doc))
			if (schemaErr == nil) != (checkErr == nil) {
				t.Fatalf("schema says %v, CheckFile says %v", schemaErr, checkErr)
			}
		})
	}
}
