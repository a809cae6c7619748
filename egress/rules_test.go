package egress

import (
	"strings"
	"testing"
)

func TestParseRuleAcceptsTheDocumentedShapes(t *testing.T) {
	for in, want := range map[string]string{
		"registry.npmjs.org":           "registry.npmjs.org",
		"*.githubusercontent.com":      "*.githubusercontent.com",
		"Example.COM:8443":             "example.com:8443",
		"GET,HEAD api.example.com/v1/": "GET,HEAD api.example.com/v1/",
		"127.0.0.1:9000":               "127.0.0.1:9000",
		"[fd00::7]:80":                 "[fd00::7]:80",
	} {
		r, err := ParseRule(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if r.String() != want {
			t.Errorf("%q = %q, want %q", in, r.String(), want)
		}
	}
}

func TestParseRuleRefusesMalformedEntries(t *testing.T) {
	for _, in := range []string{
		"", "*", "*.com", "ex ample.com", "get example.com", "example.com:0", "example.com:99999",
		"example.com:", "exa*mple.com", "a..b", "-a.com", "[::1", "::1", "1.2.3.999",
		"example.com/a b", "example.com\n", "example.com/x?y", strings.Repeat("a", 600),
	} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("%q parsed as %q", in, r)
		}
	}
}

func TestRuleAllows(t *testing.T) {
	rules, err := ParseRules([]string{"registry.npmjs.org", "*.githubusercontent.com:443", "GET api.example.com/v1/", "127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    Request
		want bool
	}{
		{Request{"CONNECT", "registry.npmjs.org", 443, ""}, true},
		{Request{"CONNECT", "registry.npmjs.org", 22, ""}, false},
		{Request{"CONNECT", "evil.registry.npmjs.org", 443, ""}, false},
		{Request{"CONNECT", "raw.githubusercontent.com", 443, ""}, true},
		{Request{"CONNECT", "githubusercontent.com", 443, ""}, false},
		{Request{"CONNECT", "xgithubusercontent.com", 443, ""}, false},
		{Request{"GET", "raw.githubusercontent.com", 80, "/"}, false},
		{Request{"GET", "api.example.com", 80, "/v1/x"}, true},
		{Request{"POST", "api.example.com", 80, "/v1/x"}, false},
		{Request{"GET", "api.example.com", 80, "/v2/x"}, false},
		{Request{"CONNECT", "api.example.com", 443, ""}, false},
		{Request{"GET", "127.0.0.1", 9000, "/"}, true},
		{Request{"GET", "127.0.0.1", 9001, "/"}, false},
	} {
		if _, got := Match(rules, c.q); got != c.want {
			t.Errorf("%+v: allowed %v, want %v", c.q, got, c.want)
		}
	}
}
