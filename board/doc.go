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
// the port, and can run a server on another port of the same host, so the
// board's credential must prove it came from the person who ran `aimi swarm
// ui` and must never reach another origin. The URL it prints carries a
// random token in its fragment (URL), which no browser sends to any server.
// The page (public, like its scripts: the same bytes for everybody, no
// swarm in them) moves the token to its tab's sessionStorage, which only
// this origin (scheme, host and port) can read, drops it from the address
// bar, and sends it in the TokenHeader on every request under /api/, the
// live streams included (read with fetch: EventSource cannot send a
// header). There is no cookie: browsers send a host's cookies to every
// port of that host, so a cookie would go to the other user's server.
// Without the header every route but the page answers 403 and closes the
// connection. Requests whose Host is not the loopback address the board
// listens on are refused too (DNS rebinding); an Origin, when sent, must be
// the board's own, Sec-Fetch-Site, when sent, same-origin (a page on another
// port is "same-site"), and an action must be a JSON POST, which no
// cross-origin form or no-cors fetch can send.
//
// # Connections
//
// Serve bounds what connections can hold (Limits): headers must arrive
// within ReadHeaderTimeout, idle kept-alive connections close after
// IdleTimeout, and at most MaxConns are open (MaxConnsPerSource from one
// address, and never more than a quarter of RLIMIT_NOFILE). A connection
// over the bound takes the place of the longest-waiting one without a
// request in progress, so a flood of parked connections displaces only
// itself and never the page's live stream, and the owner's next request
// gets in.
//
// # Untrusted text
//
// Story titles, progress output, errors and journal lines come from task
// files and containers. The server strips control characters and bounds
// their length; the page puts them into the DOM with textContent only, and
// a Content-Security-Policy allows no inline script.
package board
