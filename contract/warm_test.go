package contract

import (
	"strings"
	"testing"
)

func TestParseWarmClaimKeepsSecretsOutOfErrors(t *testing.T) {
	c, err := ParseWarmClaim([]byte(`{"env":["A=1","AIMI_GIT_TOKEN=s3cret"],"files":[{"path":"/etc/aimi/ca.pem","data":"x"}],"more":true}`))
	if err != nil || len(c.Env) != 2 || len(c.Files) != 1 || c.Files[0].Data != "x" || !c.More {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []string{`{"env":["s3cret"]}`, `s3cret`, `{"env":["1A=s3cret"]}`, `{"env":[],"files":[{"path":"rel/s3cret"}]}`, `{"env":[],"files":[{"path":"/"}]}`} {
		_, err := ParseWarmClaim([]byte(bad))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%s: err %v (want an error without the value)", bad, err)
		}
	}
}

func FuzzParseWarmClaim(f *testing.F) {
	f.Add([]byte(`{"env":["A=1"],"files":[{"path":"/a/b","data":"pem"}]}`))
	f.Add([]byte(`{"env":["=x"]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseWarmClaim(line)
		if err != nil {
			return
		}
		for _, kv := range c.Env {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !ValidEnvName(k) {
				t.Fatalf("accepted %q", kv)
			}
		}
		for _, f := range c.Files {
			if !strings.HasPrefix(f.Path, "/") || f.Path == "/" {
				t.Fatalf("accepted path %q", f.Path)
			}
		}
	})
}
