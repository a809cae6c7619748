package runner

import "testing"

// TestServiceRefusalKeepsTheReasonOnly: of git's output for a push the git
// service refused, the reason (once) is what the completion reports.
func TestServiceRefusalKeepsTheReasonOnly(t *testing.T) {
	out := "git push: exit status 1: remote: aimi: push refused: it is larger than 8 MiB, the limit of one push (git.max_push); have the user raise git.max_push        \n" +
		"To http://127.0.0.1:34807/0df5e8f38bfac2b380b91c343f8c829f\n" +
		" ! [remote rejected] HEAD -> feat/x (aimi: push refused: it is larger than 8 MiB, the limit of one push (git.max_push); have the user raise git.max_push)\n" +
		"error: failed to push some refs to 'http://127.0.0.1:34807/0df5e8f38bfac2b380b91c343f8c829f'"
	want := "aimi: push refused: it is larger than 8 MiB, the limit of one push (git.max_push); have the user raise git.max_push"
	if got := serviceRefusal(out); got != want {
		t.Errorf("serviceRefusal = %q, want %q", got, want)
	}
	twice := "remote: aimi: push to refs/heads/main refused        \nremote: aimi: push to refs/heads/main refused\nremote: aimi: deleting refs/heads/x is refused"
	if got, want := serviceRefusal(twice), "aimi: push to refs/heads/main refused; aimi: deleting refs/heads/x is refused"; got != want {
		t.Errorf("serviceRefusal = %q, want %q", got, want)
	}
	for _, other := range []string{
		"git push: exit status 128: fatal: unable to access 'http://127.0.0.1:1/x': Failed to connect",
		" ! [rejected] HEAD -> feat/x (non-fast-forward)\nremote: resolving deltas",
	} {
		if got := serviceRefusal(other); got != "" {
			t.Errorf("serviceRefusal(%q) = %q, want none", other, got)
		}
	}
}
