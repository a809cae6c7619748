package runner

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/aimi-tools/swarm/demoagent"
)

// envDemoAgent turns the test binary into the demo agent, so in-process runs
// start their agent subprocess exactly as acp-runner starts itself.
const envDemoAgent = "RUNNER_TEST_DEMO_AGENT"

// envSlowMarker names a file the demo agent creates once it has said it
// is taking its time ([demo:slow]): from then on its turn is in the slow
// part, which a test stopping it mid-story waits for.
const envSlowMarker = "RUNNER_TEST_SLOW_MARKER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envScriptAgent); mode != "" {
		scriptAgent(mode, os.Stdin, os.Stdout)
		os.Exit(0)
	}
	if mode := os.Getenv(envModelAgent); mode != "" {
		modelAgent(mode, os.Stdin, os.Stdout)
		os.Exit(0)
	}
	if os.Getenv(envDemoAgent) == "1" {
		var out io.Writer = os.Stdout
		if p := os.Getenv(envSlowMarker); p != "" {
			out = &markWhenSlow{w: os.Stdout, path: p}
		}
		if err := demoagent.Run(context.Background(), os.Stdin, out, nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// markWhenSlow passes the agent's messages on and creates path at the
// first that says the agent is taking its time.
type markWhenSlow struct {
	w    io.Writer
	path string
	done bool
}

func (m *markWhenSlow) Write(p []byte) (int, error) {
	n, err := m.w.Write(p)
	if !m.done && bytes.Contains(p, []byte("Taking my time")) {
		m.done = true
		_ = os.WriteFile(m.path, nil, 0o644)
	}
	return n, err
}

// firstRead closes reading when its reader is first read.
type firstRead struct {
	r       io.Reader
	reading chan struct{}
	once    sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { close(f.reading) })
	return f.r.Read(p)
}
