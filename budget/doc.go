// Package budget keeps what each swarm spends on model calls and answers
// the runners' question at each story boundary: may this container begin
// another story? A swarm that spent swarm.budget, or a story of the
// container that spent agent.story_budget, ends the container's run at the
// boundary with BUDGET_EXCEEDED (the story in progress finishes; its work
// is committed and pushed like any stop). The runner asks on its
// container's own authenticated channel (the local-mode git service's
// listener and token, contract.BudgetPath).
//
// Spend is the model gateway's account of every call (its cost at
// models.<provider>.prices), fed to the Keeper as the calls end. After a
// daemon restart the calls journaled before it are read back once per
// swarm (Config.Seed: JournaledSpend), so a budget holds across restarts;
// calls of a container rerun with `resume --retry-failed` whose journal
// was moved aside are not read back. The limits are read again at every
// question (Config.Limits: ReadLimits, which loads the configuration
// layers again only when one of their files changed), so a budget raised
// in the configuration takes effect at the next `aimi swarm resume`
// without a daemon restart.
//
// A budget is also a hard cap: the model gateway asks Refusal before every
// call, and a container past a budget by more than its grace
// (swarm.budget_grace) has its calls refused; the runner, whose agent then
// ends its turn in error, asks again and ends the story BUDGET_EXCEEDED.
package budget
