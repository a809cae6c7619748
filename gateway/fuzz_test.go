package gateway

import (
	"bytes"
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

// FuzzDecodingTap: whatever bytes a provider sends under whatever coding,
// the Observer gets at most the bound per layer and End once; an answer
// encoded whole and fed in any chunks decodes to what was encoded.
func FuzzDecodingTap(f *testing.F) {
	const limit = 1 << 16
	f.Add([]byte(`{"usage":{"input_tokens":3}}`), []byte{0x1f, 0x8b, 8, 0}, uint8(0), uint8(7))
	f.Add([]byte("data: {}\n\n"), []byte("garbage"), uint8(2), uint8(1))
	f.Add(bytes.Repeat([]byte{0}, 1<<17), []byte{0x28, 0xb5, 0x2f, 0xfd}, uint8(3), uint8(64))
	codings := []string{"gzip", "deflate", "br", "zstd", "deflate-raw"}
	f.Fuzz(func(t *testing.T, plain, raw []byte, which, step uint8) {
		coding := codings[int(which)%len(codings)]
		name := strings.TrimSuffix(coding, "-raw")
		feed := func(wire []byte) (*countTap, error) {
			inner := &countTap{}
			var why error
			d := newDecodingTap(inner, []string{name}, limit, func(err error) { why = err })
			for s := max(1, int(step)); len(wire) > 0; {
				k := min(s, len(wire))
				d.Body(wire[:k])
				wire = wire[k:]
			}
			d.End(&Call{})
			if inner.n > limit || inner.ended != 1 {
				t.Fatalf("%s: %d bytes to the observer (bound %d), ended %d times", coding, inner.n, limit, inner.ended)
			}
			return inner, why
		}
		feed(raw)
		got, why := feed(encode(t, coding, plain))
		if len(plain) <= limit && (why != nil || !bytes.Equal(got.body.Bytes(), plain[:min(len(plain), 1<<16)])) {
			t.Fatalf("%s: %d bytes decoded to %d (%v), want them back", coding, len(plain), got.n, why)
		}
	})
}
