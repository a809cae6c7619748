package egress

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/aimi-tools/swarm/contract"
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

// FuzzAskOf: what a refused request asks a person never carries a query
// string, a fragment or a control character, and stays bounded.
func FuzzAskOf(f *testing.F) {
	f.Add("GET http://pkg.example/simple/x/?token=secret HTTP/1.1\r\nHost: pkg.example\r\n\r\n")
	f.Add("CONNECT files.example:443 HTTP/1.1\r\nHost: files.example:443\r\n\r\n")
	f.Add("GET http://a.example/%3Fq%23f HTTP/1.1\r\nHost: a.example\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		q, err := requestOf(r)
		if err != nil {
			return
		}
		a := AskOf(contract.Sandbox{Swarm: "s", Container: "c"}, q)
		for _, s := range []string{a.Method, a.Host, a.Path, a.Target()} {
			if strings.ContainsAny(s, "?#") && s == a.Path || strings.IndexFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f }) >= 0 {
				t.Fatalf("ask %+v from %q", a, raw)
			}
		}
		if len(a.Path) > maxAskPath+3 || a.Method == http.MethodConnect && a.Path != "" {
			t.Fatalf("ask %+v from %q", a, raw)
		}
	})
}
