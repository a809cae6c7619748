// Package board serves the live web board of `aimi swarm ui`: one page that
// shows every swarm the daemon holds, by repository, updating without a
// reload, and lets the person who opened it stop, resume, retry and clean
// up.
//
// It owns the board's HTTP side and its assets (embedded, vanilla JS and
// CSS, no build step): the page, the JSON actions, and two server-sent
// event streams, one of state changes and one of a container's journal. It
// holds no state of its own and no second door into the daemon: every
// answer comes from the daemon's unix socket through the Daemon interface
// (a *daemon.Client), so whoever runs the board got in through the socket's
// permissions.
//
// # Who may use it
//
// The board listens on loopback only. Another local user can connect to
// the port, so every request must prove it came from the person who ran
// `aimi swarm ui`: the URL it printed carries a random token, which the first
// request swaps for an HttpOnly, SameSite=Strict cookie (named after the
// port: cookies are per host, not per port) and a redirect that drops the
// token from the address bar. Without the cookie or the token every route,
// the page and its scripts included, answers 403 and nothing else. Requests
// whose Host is not the loopback address the board listens on are refused
// too (DNS rebinding). Actions are POSTs with a JSON body that must also
// carry the token in a header (the page has it; a cross-site form cannot
// set headers without a preflight the board never grants), an Origin, when
// sent, equal to the board's own, and a Sec-Fetch-Site, when sent, of
// same-origin.
//
// # Untrusted text
//
// Story titles, progress output, errors and journal lines come from task
// files and containers. The server strips control characters and bounds
// their length; the page puts them into the DOM with textContent only, and
// a Content-Security-Policy allows no inline script.
package board
