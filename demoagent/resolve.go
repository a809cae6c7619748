package demoagent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// resolveAll resolves the conflicts of every file a land's fix-up story
// names (contract.NoMarkerCriterion): both sides' lines kept, in order,
// with no marker left.
func (t *turn) resolveAll(ctx context.Context, story string, files [][]string) (acp.StopReason, error) {
	if strings.Contains(t.prompt, MarkerRefuseFix) {
		return acp.StopReasonRefusal, t.say(ctx, fmt.Sprintf("The merge carries %s, so I refuse to resolve it.", MarkerRefuseFix))
	}
	if err := t.say(ctx, fmt.Sprintf("Demo agent (no model) resolving %d conflicted file(s) for %s. ", len(files), story)); err != nil {
		return "", err
	}
	if strings.Contains(t.prompt, MarkerSlowFix) {
		t.a.log.Debug(LogSlow, "story", story, "for", slowFixFor)
		select {
		case <-time.After(slowFixFor):
		case <-ctx.Done():
			return acp.StopReasonCancelled, nil
		}
	}
	for _, m := range files {
		target := filepath.Clean(m[1])
		path := filepath.Join(t.cwd, target)
		got, err := t.a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: t.sid, Path: path})
		if err != nil {
			if err := t.say(ctx, fmt.Sprintf("Reading %s failed: %v.", target, err)); err != nil {
				return "", err
			}
			return acp.StopReasonRefusal, nil
		}
		if _, err := t.a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: t.sid, Path: path, Content: KeepBothSides(got.Content)}); err != nil {
			if err := t.say(ctx, fmt.Sprintf("Writing %s failed: %v.", target, err)); err != nil {
				return "", err
			}
			return acp.StopReasonRefusal, nil
		}
	}
	return acp.StopReasonEndTurn, t.say(ctx, "I kept both sides of every conflict and left no marker.")
}

// KeepBothSides resolves git's conflict markers in text by keeping both
// sides' lines, ours then theirs, and dropping the merge base's (diff3).
func KeepBothSides(text string) string {
	var out []string
	inBase := false
	for _, line := range strings.SplitAfter(text, "\n") {
		switch {
		case strings.HasPrefix(line, "<<<<<<<"), strings.HasPrefix(line, ">>>>>>>"):
			inBase = false
		case strings.HasPrefix(line, "|||||||"):
			inBase = true
		case strings.HasPrefix(line, "=======") && strings.TrimRight(line, "\r\n") == "=======":
			inBase = false
		case !inBase:
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
