package egress

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aimi-tools/swarm/contract"
	"github.com/aimi-tools/swarm/internal/syncbuf"
	"github.com/aimi-tools/swarm/internal/testwait"
)

// A container refused again and again gets its first refusals of an
// interval logged one by one and the rest summed up in one line when the
// interval ends; another container's refusals are logged on their own.
func TestRefusalLogSumsUpAFloodPerContainer(t *testing.T) {
	var buf syncbuf.Buffer
	l := newRefusalLog(slog.New(slog.NewTextHandler(&buf, nil)), 3, 100*time.Millisecond)
	for range 100 {
		l.note(Denial{Sandbox: contract.Sandbox{Container: "flooder"}, Method: "GET", Host: "x.invalid", Port: 80, Reason: "no rule"})
	}
	l.note(Denial{Sandbox: contract.Sandbox{Container: "quiet"}, Method: "GET", Host: "y.invalid", Port: 80, Reason: "no rule"})
	testwait.Eventually(t, time.Minute, "a line that sums up the 97 refusals not logged", func() error {
		if out := buf.String(); !strings.Contains(out, "more=97") {
			return fmt.Errorf("log:\n%s", out)
		}
		return nil
	}, testwait.Every(10*time.Millisecond))
	out := buf.String()
	if n := strings.Count(out, `msg="egress denied" container=flooder`); n != 3 {
		t.Errorf("%d refusals of the flooder logged one by one, want 3:\n%s", n, out)
	}
	if n := strings.Count(out, `msg="egress denied" container=quiet`); n != 1 {
		t.Errorf("the quiet container's refusal logged %d times, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "container=quiet more=") {
		t.Errorf("a container with nothing left over is summed up:\n%s", out)
	}
	// The next interval starts afresh.
	l.note(Denial{Sandbox: contract.Sandbox{Container: "flooder"}, Method: "GET", Host: "x.invalid", Port: 80, Reason: "no rule"})
	if n := strings.Count(buf.String(), `msg="egress denied" container=flooder`); n != 4 {
		t.Errorf("after its interval the flooder's next refusal is not logged (%d lines)", n)
	}
}
