package runner

import (
	"context"
	"os"
	"testing"

	"github.com/aimi-tools/swarm/demoagent"
)

// envDemoAgent turns the test binary into the demo agent, so in-process runs
// start their agent subprocess exactly as acp-runner starts itself.
const envDemoAgent = "RUNNER_TEST_DEMO_AGENT"

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
		if err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, nil); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
