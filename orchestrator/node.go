package orchestrator

import (
	"context"
	"time"
)

func (sw *swarm) setNode(c *ctr, node string) {
	if node == "" {
		return
	}
	sw.mu.Lock()
	c.node = node
	sw.mu.Unlock()
}

// watchNode learns the node a container runs on once the engine placed it
// (a cluster schedules it some time after the start). It gives up when the
// container runs with a process but no node (a single engine), ends, or
// after nodeWatch.
func (sw *swarm) watchNode(ctx context.Context, c *ctr, id string) {
	deadline := time.Now().Add(nodeWatch)
	for time.Now().Before(deadline) {
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		info, err := sw.m.eng.Inspect(ctx, id)
		if err != nil {
			return
		}
		if info.Node != "" {
			sw.setNode(c, info.Node)
			return
		}
		if info.Running && info.Pid > 0 || info.Status == "exited" || info.Status == "dead" {
			return
		}
	}
}

// nodeWatch bounds watchNode: a cluster that has not placed a container by
// then shows no node for it until the daemon inspects it again.
const nodeWatch = 2 * time.Minute
