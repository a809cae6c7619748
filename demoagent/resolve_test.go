package demoagent

import "testing"

func TestKeepBothSides(t *testing.T) {
	in := "# f\n\n<<<<<<< ours\nmine\n||||||| base\nold\n=======\ntheirs\n>>>>>>> theirs\nend\n"
	if got, want := KeepBothSides(in), "# f\n\nmine\ntheirs\nend\n"; got != want {
		t.Errorf("KeepBothSides: %q, want %q", got, want)
	}
	if got := KeepBothSides("a\n=======x\n"); got != "a\n=======x\n" {
		t.Errorf("a line that only starts like a marker was dropped: %q", got)
	}
}
