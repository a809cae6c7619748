// Package inbox holds the agents' permission requests that wait for a
// person (agent.permission_policy ask or ask-kinds:). acp-runner sends each
// request on its container's own authenticated channel (the local-mode git
// service's listener and token, contract.AskPath), again and again until it
// is answered: the inbox holds it in memory, a person answers it through
// the daemon's API (aimi swarm answer, the board), and the runner's next or
// waiting send gets the option chosen. After agent.ask_timeout the fallback
// (agent.ask_fallback) answers it. A daemon restart loses nothing a person
// needs: the runners send their requests again and they are back, under
// the same ids. A container that ended drops its requests.
//
// Everything in a request comes from the agent and is bounded here (sizes,
// counts, pending requests per container and in total, the journal lines
// of one container's requests a minute); it is dated at its arrival, and
// the secrets the daemon knows are replaced in its text before anyone sees
// it (package redact); presenters filter control characters. Requests,
// answers, fallbacks and refusals are journaled in the container's journal
// and published as events.
//
// The egress proxy asks through the inbox too (Inbox.Ask, egress.ask): a
// request of kind fetch per host and swarm, which every container of the
// swarm asking for the host joins; a person's answer is granted for its
// scope (Config.Grant) and journaled in each container it covers; a
// timeout refuses it, whatever the fallback.
package inbox
