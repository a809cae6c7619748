package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aimi-tools/swarm/cli"
)

// hostile is what a hostile container prints to take over the terminal of
// whoever watches it: clear the screen, a green "Swarm OK", the window
// title (OSC 0), the clipboard (OSC 52), a C1 CSI in UTF-8 and as a raw
// byte, a carriage return, DEL and a bidi override.
const hostile = "\x1b[2J\x1b[H\x1b[32mSwarm OK\x1b[0m\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u009b31m\x9b2J\rover\x7f\u202etxet"

// terminalActs reports the first character of out a terminal would act on,
// or -1. own matches the command's own control sequences, allowed through.
func terminalActs(out string, own *regexp.Regexp) rune {
	if own != nil {
		out = own.ReplaceAllString(out, "")
	}
	for i, r := range out {
		switch {
		case r == utf8.RuneError && len(out) > i && out[i] != 0xef:
			return rune(out[i]) // a byte that is not UTF-8
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f),
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return r
		}
	}
	return -1
}

// fakeTTY is an output stream that says it is a terminal.
type fakeTTY struct{ bytes.Buffer }

func (*fakeTTY) IsTerminal() bool { return true }

// TestHostileContainerOutputNeverReachesTheTerminalRaw: a stand-in
// container prints escape sequences as garbage lines, in a progress
// update's output and in an error message. start --follow (on a terminal and
// not), status and logs show them neutralised; --json answers carry them
// exactly.
func TestHostileContainerOutputNeverReachesTheTerminalRaw(t *testing.T) {
	parallel(t)
	image := standinImage(t)
	repo := gitRepo(t, 1, "evil")
	commitAll(t, repo)
	dir := shortDir(t)
	sock := filepath.Join(dir, "aimid.sock")
	// The script's separators (';', '|') appear in escape sequences: the
	// garbage line goes as hex; the message texts avoid them.
	inMsg := strings.NewReplacer(";", " ", "|", " ", "\x9b", "").Replace(hostile)
	script := "pace|200ms;hex|" + hex.EncodeToString([]byte(hostile)) +
		";progress|US-001|in_progress|" + inMsg +
		";error|AGENT_CRASH|" + inMsg + ";exit|1"
	p := launch(t, daemonOpts{
		Sock:    sock,
		DataDir: filepath.Join(dir, "data"),
		Image:   image,
		Scripts: map[string]string{"STANDIN_SCRIPT": script},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tty := &fakeTTY{}
	var errb bytes.Buffer
	code := cli.Run(ctx, []string{"swarm", "start", "--all", "--follow", "--refresh", "100ms", "--repo", repo, "--socket", sock},
		cli.Streams{In: strings.NewReader(""), Out: tty, Err: &errb})
	if code != cli.ExitInvalid {
		t.Fatalf("start --follow on a terminal: exit %d\n%q\n%q", code, tty.String(), errb.String())
	}
	own := regexp.MustCompile(`\x1b\[\d+A\x1b\[J`) // the follow view's redraw
	if r := terminalActs(tty.String(), own); r >= 0 {
		t.Errorf("start --follow (terminal) let %U through:\n%q", r, tty.String())
	}
	if !strings.Contains(tty.String(), `\u001b[32mSwarm OK`) {
		t.Errorf("start --follow (terminal) does not show the output, escaped:\n%q", tty.String())
	}
	run, _ := recordingAimi(ctx, repo, sock)
	// Names are the engine's, shared with other tests: found by task file.
	evil := containerOf(t, validState(t, repo), "evil").ContainerName
	for _, args := range [][]string{
		{"swarm", "status"},
		{"swarm", "logs", evil},
	} {
		_, out, errOut := run(args...)
		if r := terminalActs(out+errOut, nil); r >= 0 {
			t.Errorf("%v let %U through:\n%q\n%q", args, r, out, errOut)
		}
		if args[1] == "logs" && !strings.Contains(out, `\u001b]52`) {
			t.Errorf("logs do not show the garbage line, escaped:\n%q", out)
		}
	}
	// A rerun of follow without a terminal (one line per change).
	_, out, errOut := run("swarm", "start", "--all", "--follow", "--force")
	if r := terminalActs(out+errOut, nil); r >= 0 {
		t.Errorf("start --follow (no terminal) let %U through:\n%q\n%q", r, out, errOut)
	}
	// --json answers are exact: decoded, they hold the container's bytes.
	_, out, _ = run("swarm", "status", "--json")
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Errorf("status --json is not JSON: %v\n%q", err, out)
	}
	_, out, _ = run("swarm", "logs", evil, "--json")
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("logs --json line is not JSON: %v\n%q", err, sc.Text())
		}
		b, _ := json.Marshal(rec)
		if strings.Contains(string(b), `\u001b]52;c;cm0gLXJmIH4=\u0007`) {
			found = true
		}
	}
	if !found {
		t.Errorf("logs --json lost the container's exact output:\n%q", out)
	}
	p.stop(t)
}
