package gateway

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/aimi-tools/swarm/contract"
)

// encode is plain in one content coding ("deflate-raw": the raw deflate
// some servers send as deflate).
func encode(t testing.TB, coding string, plain []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip", "x-gzip":
		w = gzip.NewWriter(&b)
	case "deflate":
		w = zlib.NewWriter(&b)
	case "deflate-raw":
		w, _ = flate.NewWriter(&b, flate.BestSpeed)
	case "br":
		w = brotli.NewWriter(&b)
	case "zstd":
		z, err := zstd.NewWriter(&b, zstd.WithWindowSize(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		w = z
	default:
		t.Fatalf("no encoder for %q", coding)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestEncodedAnswersReachTheObserverDecoded: the gateway asks the provider
// for identity whatever the sandbox's client asked; a provider that
// compresses anyway (each coding, stacked ones, a stream flushed in
// pieces) reaches the client byte for byte as it sent it, and the
// Observer reads the answer decoded.
func TestEncodedAnswersReachTheObserverDecoded(t *testing.T) {
	f := newFixture(t, Limits{})
	const plain = `{"type":"message","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":1}}`
	var mu sync.Mutex
	var asked []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		codings := strings.Split(r.URL.Query().Get("enc"), ",")
		body := []byte(plain)
		for _, c := range codings {
			body = encode(t, c, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", strings.ReplaceAll(r.URL.Query().Get("enc"), "deflate-raw", "deflate"))
		for len(body) > 0 { // in pieces, as a stream comes
			k := min(7, len(body))
			w.Write(body[:k])
			w.(http.Flusher).Flush()
			body = body[k:]
		}
	}))
	t.Cleanup(up.Close)
	a := f.s.providers["anthropic"]
	a.URL, _ = ParseURL(up.URL)
	f.s.providers["anthropic"] = a
	g, err := f.s.Grant(contract.Sandbox{Swarm: "sw1", Container: "aimi-one"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := f.client("127.0.0.1")
	c.Transport.(*http.Transport).DisableCompression = true // the client reads the bytes as they came
	for _, enc := range []string{"gzip", "x-gzip", "deflate", "deflate-raw", "br", "zstd", "gzip,br"} {
		f.rec.mu.Lock()
		f.rec.body.Reset()
		f.rec.mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, g.Env["ANTHROPIC_BASE_URL"]+"/v1/messages?enc="+enc, strings.NewReader(`{}`))
		req.Header.Set("X-Api-Key", g.Env["ANTHROPIC_API_KEY"])
		req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := []byte(plain)
		for _, c := range strings.Split(enc, ",") {
			want = encode(t, c, want)
		}
		if err != nil || !bytes.Equal(got, want) || resp.Header.Get("Content-Encoding") == "" {
			t.Errorf("%s: the client got %d bytes (%v, Content-Encoding %q), want the provider's %d", enc, len(got), err, resp.Header.Get("Content-Encoding"), len(want))
		}
		f.rec.mu.Lock()
		if seen := f.rec.body.String(); seen != plain {
			t.Errorf("%s: the observer read %q, want the answer decoded", enc, seen)
		}
		f.rec.mu.Unlock()
	}
	mu.Lock()
	for _, a := range asked {
		if a != "identity" {
			t.Errorf("the provider was asked for Accept-Encoding %q, want identity", a)
		}
	}
	mu.Unlock()
	checkNoSecret(t, f, g.Env["ANTHROPIC_API_KEY"])
}

// countTap counts what it is given and whether it ended.
type countTap struct {
	n     int64
	ended int
	body  bytes.Buffer
}

func (c *countTap) Body(p []byte) {
	c.n += int64(len(p))
	if c.body.Len() < 1<<16 {
		c.body.Write(p[:min(len(p), 1<<16-c.body.Len())])
	}
}
func (c *countTap) End(*Call) { c.ended++ }

// TestDecompressionBombsAreBounded: an answer that decodes to far more
// than the bound of 64 KiB (64 MiB of zeros in gzip members or zstd
// frames, one MiB in a deflate or brotli stream; two layers of gzip, the
// inner of empty members) gives the Observer the bound at most, tells why
// decoding stopped, and ends once.
func TestDecompressionBombsAreBounded(t *testing.T) {
	const limit = 64 << 10
	zeros := make([]byte, 1<<20)
	for _, coding := range []string{"gzip", "deflate", "br", "zstd"} {
		var wire bytes.Buffer
		enc := encode(t, coding, zeros)
		for range 64 { // 64 MiB decoded: concatenated members/frames where the format allows
			wire.Write(enc)
		}
		if coding == "br" || coding == "deflate" {
			wire.Reset()
			wire.Write(enc) // one stream only; still 16 times the bound
		}
		inner := &countTap{}
		var why error
		d := newDecodingTap(inner, []string{coding}, limit, func(err error) { why = err })
		b := wire.Bytes()
		for len(b) > 0 {
			k := min(32<<10, len(b))
			d.Body(b[:k])
			b = b[k:]
		}
		d.End(&Call{})
		if inner.n > limit || inner.ended != 1 || why == nil {
			t.Errorf("%s: the observer got %d bytes (bound %d), ended %d times, why %v", coding, inner.n, limit, inner.ended, why)
		}
	}
	// Two layers: the outer gzip decodes to empty gzip members, which the
	// inner reads without output; the outer's own bound stops it.
	var members bytes.Buffer
	empty := encode(t, "gzip", nil)
	for members.Len() < 4*limit {
		members.Write(empty)
	}
	inner := &countTap{}
	var why error
	d := newDecodingTap(inner, []string{"gzip", "gzip"}, limit, func(err error) { why = err })
	d.Body(encode(t, "gzip", members.Bytes()))
	d.End(&Call{})
	if inner.ended != 1 || why == nil || !strings.Contains(why.Error(), "more than") {
		t.Errorf("stacked gzip of empty members: ended %d, why %v", inner.ended, why)
	}
}

// An answer cut mid-way, garbage, an unknown coding: the Observer reads
// what decoded and ends once; an empty answer (HEAD, 204) is no warning.
func TestBrokenEncodedAnswers(t *testing.T) {
	plain := []byte(`data: {"usage":{"output_tokens":5}}` + "\n\n")
	gz := encode(t, "gzip", plain)
	for name, tc := range map[string]struct {
		coding string
		wire   []byte
		warn   bool
	}{
		"cut":     {"gzip", gz[:len(gz)-4], true},
		"garbage": {"br", []byte("not brotli at all"), true},
		"empty":   {"gzip", nil, false},
	} {
		inner := &countTap{}
		var why error
		d := newDecodingTap(inner, []string{tc.coding}, 1<<20, func(err error) { why = err })
		d.Body(tc.wire)
		d.End(&Call{})
		if inner.ended != 1 || (why != nil) != tc.warn {
			t.Errorf("%s: ended %d, why %v (want a warning: %v)", name, inner.ended, why, tc.warn)
		}
	}
	for _, h := range []string{"compress", "gzip, gzip, gzip, gzip", "exi"} {
		if _, ok := answerEncodings(http.Header{"Content-Encoding": {h}}); ok {
			t.Errorf("Content-Encoding %q taken as decodable", h)
		}
	}
	if c, ok := answerEncodings(http.Header{"Content-Encoding": {"identity, GZIP", "br"}}); !ok || fmt.Sprint(c) != "[gzip br]" {
		t.Errorf("codings %v %v", c, ok)
	}
}
