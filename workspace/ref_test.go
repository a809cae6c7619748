package workspace

import (
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// TestEachRepositoryHasItsOwnImageName: a repository's image is named for
// the daemon, the repository and the commit, so two repositories at the
// same commit (a copy, a fork) never share one, and the warm pool, whose
// key holds the image, never gives one repository's sandbox to another's
// swarm.
func TestEachRepositoryHasItsOwnImageName(t *testing.T) {
	m := New(nil, Options{Labels: map[string]string{contract.LabelDaemon: "a"}})
	const commit = "0123456789abcdef0123456789abcdef01234567"
	if m.ref("/repo/one", commit) == m.ref("/repo/two", commit) {
		t.Fatal("two repositories at one commit share an image name")
	}
	other := New(nil, Options{Labels: map[string]string{contract.LabelDaemon: "b"}})
	if m.ref("/repo/one", commit) == other.ref("/repo/one", commit) {
		t.Fatal("two daemons share an image name for one repository")
	}
	if m.ref("/repo/one", commit) != m.ref("/repo/one", commit) {
		t.Fatal("an image name is not stable")
	}
}
