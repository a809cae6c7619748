package gateway

import (
	"net/http"
	"time"
)

// Call is one request a sandbox made through the gateway, as an Observer
// sees it. It holds no key and no placeholder: the request's headers are
// not in it, and Path is the provider's path without the query (where a
// client may put a key).
type Call struct {
	Swarm, Container string
	Provider         string
	Method, Path     string
	Started          time.Time
	// Status is the answer's status code: the upstream's, or the
	// gateway's own (401, 403, 413, 429, 502) when Refused says why it did
	// not forward the request.
	Status  int
	Refused string
	// Header is the upstream answer's header (retry-after, the rate-limit
	// headers, request ids); nil when the gateway answered itself.
	Header http.Header
	// RequestBytes is what the sandbox sent upstream; ResponseBytes what
	// came back (both of the bodies), set at End.
	RequestBytes, ResponseBytes int64
	// Duration and Err are set at End: the time until the answer's last
	// byte, and why the answer ended early ("" when it did not).
	Duration time.Duration
	Err      string
	// Limit is the gateway's decision on a limited answer (429, 529),
	// made once as its headers arrive: the gateway holds the provider's
	// calls at least until then. nil for any other answer.
	Limit *Limit
}

// Limit is a provider's limit as the gateway decided it from one limited
// answer.
type Limit struct {
	Until time.Time
	// Source names the header the reset was read from, or "backoff"
	// when the answer named none.
	Source string
}

// Observer hears every call through the gateway: the place for limits,
// cost and usage accounting. Begin is called once the upstream's answer
// headers are in (or the gateway refused the call); the Tap it returns
// (nil: none) sees every chunk of the answer body as it passes to the
// sandbox (token usage in JSON answers and SSE events), decoded from its
// Content-Encoding (gzip, deflate, br, zstd; see upstreamEncoding), and
// then End.
// Neither may block: the answer streams through the same goroutine.
type Observer interface {
	Begin(c *Call) Tap
}

// Tap follows one answer's body.
type Tap interface {
	// Body sees each chunk as it passes; p is only valid during the call.
	Body(p []byte)
	// End is called once, when the answer is over.
	End(c *Call)
}

// observe begins c with o (nil o: nothing) and, for a call the gateway
// answered itself, ends it at once.
func observe(o Observer, c *Call, done bool) Tap {
	if o == nil {
		return nil
	}
	t := o.Begin(c)
	if done && t != nil {
		t.End(c)
		return nil
	}
	return t
}
