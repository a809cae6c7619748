package acpclient

import (
	"context"
	"fmt"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// Tool calls, permission requests and files are the agent's to multiply:
// what the runner keeps of them, and the summary, stay bounded.
func TestTranscriptKeepsABoundedNumberOfToolCallsPermissionsAndFiles(t *testing.T) {
	c, _ := newTestClient(t, "allow")
	ctx := context.Background()
	title := strings.Repeat("t", 4096)
	const n = 20000
	for i := range n {
		u := acp.StartToolCall(acp.ToolCallId(fmt.Sprintf("c%d", i)), title, acp.WithStartKind(acp.ToolKindEdit))
		if err := c.SessionUpdate(ctx, acp.SessionNotification{SessionId: "s", Update: u}); err != nil {
			t.Fatal(err)
		}
		c.transcript.notePermission(title, "allowed")
		c.transcript.noteFile("wrote", fmt.Sprintf("f%d", i))
	}
	tr := c.Transcript()
	calls, perms := tr.ToolCalls(), tr.Permissions()
	kept := 0
	for _, tc := range calls {
		kept += len(tc.Title)
	}
	for _, p := range perms {
		kept += len(p)
	}
	if len(calls) > maxTranscriptEntries || len(perms) > maxTranscriptEntries || kept > 2*maxTranscriptEntries*(maxTitleBytes+64) {
		t.Fatalf("kept %d tool calls, %d permissions, %d bytes of titles; want at most %d entries of %d bytes each",
			len(calls), len(perms), kept, maxTranscriptEntries, maxTitleBytes)
	}
	s := tr.Summary()
	if len(s) > 8*maxTranscriptEntries*(maxTitleBytes+64) {
		t.Fatalf("summary of %d bytes", len(s))
	}
	if !strings.Contains(s, fmt.Sprintf("%d more", n-maxTranscriptEntries)) {
		t.Errorf("summary does not say how many tool calls it left out: %.300s", s)
	}
}
