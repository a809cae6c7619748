package contract

import (
	"strings"
	"testing"
)

func TestParseWarmClaimKeepsSecretsOutOfErrors(t *testing.T) {
	c, err := ParseWarmClaim([]byte(`{"env":["A=1","AIMI_GIT_TOKEN=s3cret"],"caPem":"x"}`))
	if err != nil || len(c.Env) != 2 || c.CAPEM != "x" {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range []string{`{"env":["s3cret"]}`, `s3cret`, `{"env":["1A=s3cret"]}`} {
		_, err := ParseWarmClaim([]byte(bad))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%s: err %v (want an error without the value)", bad, err)
		}
	}
}

func FuzzParseWarmClaim(f *testing.F) {
	f.Add([]byte(`{"env":["A=1"],"caPem":"pem"}`))
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
	})
}
