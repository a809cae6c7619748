// Package gateway is the daemon's model gateway: model API keys stay in
// the daemon. A sandbox whose agent.env names a model key (ANTHROPIC_API_KEY,
// OPENAI_API_KEY, GEMINI_API_KEY...) gets a per-container placeholder in
// that variable instead, and the provider's base-URL variable
// (ANTHROPIC_BASE_URL...) pointing here, over HTTPS with a certificate of
// the daemon's CA (package daemonca, the one the git service uses).
//
// A request's placeholder is its container's credential, bound like the
// git service's tokens: it works only through its network's gateway
// address, only from the first address that used it (its container's),
// and not after Revoke (the container ended). A container without a
// network reaches the gateway through a socket of its own instead
// (ServeSandbox, served by its runner on SandboxPort of its loopback): the
// socket says which container asks, and a placeholder is accepted only
// from its own. The gateway removes every
// credential header, puts the real key where the provider expects it and
// forwards only to that provider's upstream (models.<name>.url). Answers
// stream through unbuffered. Placeholders are persisted as hashes only, so
// running containers keep their access across a daemon restart.
//
// Everything a sandbox can make it hold is bounded: connections per source
// address and in total, requests of one container at once, header and body
// sizes, idle connections and the time of a call. Neither keys nor
// placeholders are logged. An Observer hears every call (status, answer
// headers, the streamed body) for limits and accounting.
package gateway
