package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzRouteAndCredential: whatever path and headers a sandbox sends,
// Route never lets a path climb out of its provider and Credential only
// returns a value of a placeholder's shape that the request carried.
func FuzzRouteAndCredential(f *testing.F) {
	f.Add("/anthropic/v1/messages", "Bearer aimi-gateway-00", "key=x")
	f.Add("/openai/../x", "", "")
	f.Add("//", "bearer  "+prefix+strings.Repeat("a", 64), "a=1&key="+prefix+strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, path, auth, query string) {
		if name, rest, ok := Route(path); ok {
			if !nameRE.MatchString(name) || strings.Contains(rest+"/", "/../") || strings.Contains(rest+"/", "/./") {
				t.Fatalf("Route(%q) = %q %q", path, name, rest)
			}
		}
		h := http.Header{}
		h.Set("Authorization", auth)
		h.Set("X-Api-Key", auth)
		c := Credential(h, query)
		if c != "" && (!strings.HasPrefix(c, prefix) || len(c) != len(prefix)+64 || !(strings.Contains(auth, c) || strings.Contains(query, c))) {
			t.Fatalf("Credential = %q from %q %q", c, auth, query)
		}
	})
}
