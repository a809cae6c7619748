package egress

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"registry.npmjs.org", "*.githubusercontent.com:443", "GET,HEAD a.b/c/", "[fd00::1]:80", "10.0.0.1", "x y z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		// The normal form parses to itself.
		again, err := ParseRule(r.String())
		if err != nil || again.String() != r.String() {
			t.Fatalf("%q -> %q -> %q, %v", s, r.String(), again.String(), err)
		}
	})
}

func FuzzRequestOf(f *testing.F) {
	f.Add("CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n")
	f.Add("GET http://a.example/x/../y HTTP/1.1\r\nHost: a.example\r\n\r\n")
	f.Add("GET /local HTTP/1.1\r\nHost: [::1]:80\r\n\r\n")
	rules, _ := ParseRules([]string{"*.example", "GET a.example/x/", "127.0.0.1:9"})
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		q, err := requestOf(r)
		if err != nil {
			return
		}
		if strings.ContainsAny(q.Host, "/ \r\n") || q.Port < 1 || q.Port > 65535 {
			t.Fatalf("accepted %+v", q)
		}
		Match(rules, q)
	})
}
