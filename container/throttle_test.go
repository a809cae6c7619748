package container

import "testing"

// The attach that holds a container back lets its output run at most
// backPressureWindow ahead of what the reader delivered or holds as a line
// still open (a long line without its newline must not stop the container
// that is still writing it).
func TestOutputGateOpensAsTheReaderCatchesUp(t *testing.T) {
	g := newOutputGate()
	if !g.open(backPressureWindow) {
		t.Fatal("closed within the window before anything was delivered")
	}
	if g.open(backPressureWindow + 1) {
		t.Fatal("open past the window with nothing delivered")
	}
	g.Delivered(99) // 100 bytes with the newline
	if !g.open(backPressureWindow+100) || g.open(backPressureWindow+101) {
		t.Fatal("a delivered line did not move the window by its size")
	}
	g.pending.Store(5000)
	if !g.open(backPressureWindow + 5100) {
		t.Fatal("a line still open does not count as read")
	}
	select {
	case <-g.wake:
	default:
		t.Fatal("a delivery did not wake the waiting attach")
	}
}
