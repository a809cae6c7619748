package runner

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
)

// A claimed sandbox's runner takes its environment and files from the claim
// lines (a file may go on over several) and leaves the task-request that
// follows, past a repeated claim, for the request reader.
func TestApplyWarmClaimSetsEnvAndFilesAndLeavesTheRequest(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{contract.EnvWarm: "1"}
	lines := `{"env":["` + contract.EnvGitToken + `=tok","X=a=b","` + contract.EnvGitSSLCAInfo + `=/etc/aimi/ca.pem"],"files":[{"path":"/etc/aimi/ca.pem","data":"PE"}],"more":true}` + "\n" +
		`{"env":null,"files":[{"path":"/etc/aimi/ca.pem","data":"M"}]}` + "\n" +
		`{"env":["A=again"]}` + "\n" + `{"type":"task-request"}` + "\n"
	in := bufio.NewReader(strings.NewReader(lines))
	set := func(k, v string) error { env[k] = v; return nil }
	if err := ApplyWarmClaim(func(k string) string { return env[k] }, set, in, dir); err != nil {
		t.Fatal(err)
	}
	if env[contract.EnvGitToken] != "tok" || env["X"] != "a=b" || env["A"] != "" {
		t.Fatalf("env %v", env)
	}
	ca := env[contract.EnvGitSSLCAInfo]
	if b, err := os.ReadFile(ca); err != nil || string(b) != "PEM" || filepath.Dir(ca) != dir {
		t.Fatalf("CA file %q: %q %v", ca, b, err)
	}
	rest, _ := bufio.NewReader(SkipClaims(in)).ReadString('\n')
	if rest != `{"type":"task-request"}`+"\n" {
		t.Fatalf("the request line was not left: %q", rest)
	}
}

func TestApplyWarmClaimWithoutWarmReadsNothing(t *testing.T) {
	in := bufio.NewReader(strings.NewReader("line\n"))
	if err := ApplyWarmClaim(func(string) string { return "" }, nil, in, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if in.Buffered() != 0 {
		t.Fatal("read stdin without contract.EnvWarm")
	}
}
