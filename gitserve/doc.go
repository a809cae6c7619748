// Package gitserve is the daemon's git service for local mode: it serves a
// bare mirror of the user's checkout per swarm over smart HTTP (git
// http-backend behind net/http/cgi) on TLS, on the swarm networks'
// gateways, with one random token per container. A token may clone and
// fetch its swarm's repository (every branch of it: containers of a swarm
// may read each other's work) and push exactly refs/heads/<its branch>,
// fast-forward only, never deleting it: the ref updates of every push are
// parsed from the request's pkt-lines before git sees the request, and a
// pre-receive hook in the mirror checks them again.
//
// Tokens are not bearer tokens: grants are per swarm and container, and
// through a container's own socket (ServeSandbox, what the daemon serves
// each sandbox) a token works only when it is that container's. On a
// listener (ListenOn) a token works only through its swarm network's
// gateway and only from the address that used it first, and each
// listener closes connections from outside that network's subnet. A
// listener whose address the host no longer has (its network removed) is
// closed and forgotten by a periodic sweep.
//
// Whatever a sandbox can make it hold is bounded (Limits): connections per
// source address and in total (those past them are closed as they are
// accepted), git http-backend processes per container and in total,
// headers, bodies and the time of a request, the size of one push
// (git.max_push) and what one swarm's pushes add to its mirror
// (git.max_mirror). Request bodies are read whole into an unlinked spool
// file before git sees them, so a push past a limit is refused with a
// report git prints as "[remote rejected]" naming the key to raise, and
// nothing of it reaches the mirror.
//
// The same listener and token carry a container's permission requests for
// a person (contract.AskPath): the service checks the token as for git and hands the request, with the container it came from, to the
// Asks the daemon set (its inbox).
//
// It owns the service's CA (created once in its data directory), the
// mirrors, the grants (persisted as token hashes, never the tokens, with the
// port, so containers keep their access across a daemon restart) and the
// record of what each container pushed (Received). Unreceived answers "what
// would be lost if this container went" by reading the branch out of the
// container through the TipProbe it is given (EngineProbe) and comparing
// it with what the mirror and the checkout hold. Publishing the received
// branch to the user's checkout and a hosted remote is package publish;
// which containers to start, keep or remove is the orchestrator's.
package gitserve
