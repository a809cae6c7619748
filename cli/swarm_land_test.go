package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/api"
	"github.com/aimi-tools/swarm/daemon"
)

// A land whose answer never came says it was cut short and that running
// it again goes on; an answer the daemon gave, or no daemon at all, is
// left as it is.
func TestLandCutSaysToRunItAgain(t *testing.T) {
	var ee *ExitError
	if err := landCut(errors.New("POST /v1/swarms/land on s: " + io.EOF.Error())); !errors.As(err, &ee) || ee.Code != ExitDaemon || !strings.Contains(err.Error(), "run 'aimi swarm land' again") {
		t.Errorf("daemon gone: %v", err)
	}
	if err := landCut(context.Canceled); !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "goes on where it stopped") {
		t.Errorf("interrupted: %v", err)
	}
	ae := &api.APIError{Status: 400}
	if err := landCut(ae); err != ae {
		t.Errorf("an answer of the daemon: %v", err)
	}
	un := &daemon.UnreachableError{Socket: "s", Err: errors.New("no such file")}
	if err := landCut(un); err != un {
		t.Errorf("no daemon: %v", err)
	}
}
