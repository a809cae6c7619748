package orchestrator

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aimi-tools/swarm/acpmsg"
	"github.com/aimi-tools/swarm/contract"
)

// On an engine that cannot read a container's files (Swarm mode: the task
// container is on another node) the git service judges a local-mode
// container's work by what it received, and a container that pushed once
// looks delivered. What it committed after its last push that arrived is
// named only by its report: GIT_PUSH_FAILED (the runner's completion, or
// the daemon's withdrawal of a completion), with the commits it lacks. So
// such a container counts as holding unreceived commits there: cleanup
// keeps it unless forced, saying where the commits are and that fetch
// cannot take them, and a rerun or new start of its task file is refused
// rather than replacing it (which would drop them without a word).

// pushFailedIDs finds the abbreviated commit ids a GIT_PUSH_FAILED report
// names: "(608c27b15d6d 1a2b3c4d5e6f and 3 more)".
var pushFailedIDs = regexp.MustCompile(`\(([0-9a-f]{7,40}(?: [0-9a-f]{7,40})*)`)

// maxUnpushedIDs bounds what is kept of a report's commit ids (the runner
// names at most 10).
const maxUnpushedIDs = 10

// notePushFailed records that c reported commits its pushes did not
// deliver, from an error message's code and text, or from a completion's
// error text (code ""). Caller holds swarm.mu.
func (c *ctr) notePushFailed(code, text string) {
	if code == "" { // a completion's error: "CODE: text"
		code, text, _ = strings.Cut(text, ": ")
	}
	if code != acpmsg.CodeGitPushFailed {
		return
	}
	c.pushFailed = true
	if m := pushFailedIDs.FindStringSubmatch(text); m != nil {
		ids := strings.Fields(m[1])
		c.unpushed = ids[:min(len(ids), maxUnpushedIDs)]
	}
}

// errUnreadable is the answer of unreceived for a container that reported
// unreceived commits on an engine that cannot read it: nobody can take
// them but the user, by hand, from the node.
type errUnreadable struct{ h holder }

func (e *errUnreadable) Error() string {
	where := "its task container, on its node while the cluster keeps it"
	if e.h.node != "" {
		where = "its task container on node " + e.h.node + " while the cluster keeps it"
	}
	return fmt.Sprintf("its last push never arrived (GIT_PUSH_FAILED), so commit(s) of its branch %s were received nowhere; "+
		"on this backend (Swarm mode) aimid cannot read a container's files, so neither cleanup nor 'aimi swarm fetch' can take them. "+
		"They are in %s: on that node 'docker ps -a --filter label=%s=%s' finds it and 'docker cp ID:/workspace/.git DIR' copies them out; "+
		"then 'aimi swarm cleanup --force' removes it",
		e.h.branch, where, contract.LabelContainer, e.h.name)
}

// unreadable returns the errUnreadable of h when this engine cannot read
// containers and h reported unreceived commits, with the commits it named.
func (m *Manager) unreadable(h holder) ([]string, error) {
	if m.cfg.Work != nil || !h.pushFailed {
		return nil, nil
	}
	return h.unpushed, &errUnreadable{h: h}
}

// isUnreadable reports whether err is an errUnreadable.
func isUnreadable(err error) bool {
	var u *errUnreadable
	return errors.As(err, &u)
}

// withReport fills h with what the swarm that ran it knows of its pushes
// (a holder found on the engine carries only its labels): the repository's
// swarm in memory, when it is h's.
func (m *Manager) withReport(repo string, h holder) holder {
	sw := m.getSwarm(repo)
	if sw == nil || sw.id != h.swarmID {
		return h
	}
	if c := sw.find(h.name); c != nil {
		return sw.holder(c)
	}
	return h
}
