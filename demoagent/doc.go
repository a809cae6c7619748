// Package demoagent is the built-in deterministic Agent Client Protocol agent
// behind AIMI_AGENT=demo (`acp-runner demo-agent`). It needs no model and no
// network, and each prompt exercises the whole client side of the protocol:
// a streamed message, a plan, a permission request, fs/write_text_file,
// fs/read_text_file, a terminal command through terminal/*, tool call updates,
// and a stop reason. It runs as a subprocess of the runner so that demos and
// tests take exactly the code path of real agents.
//
// What it does per prompt:
//   - writes the file named by the first "File <name> exists" line of the
//     prompt (the form the planners use in acceptance criteria), else
//     "<story-id>.md", with a few deterministic lines about the story;
//   - runs `git status --short` in the workspace and reports its output;
//   - ends with end_turn.
//
// Markers in the prompt (put them in a story's title, description or notes;
// text after "This story builds on:", where the runner quotes dependencies,
// is ignored) make behaviour deterministic for tests and demos:
//   - "[demo:fail]": the agent writes nothing and ends with the refusal stop
//     reason, so the runner marks the story failed;
//   - "[demo:slow]": the agent waits (up to 60s) before finishing, until the
//     turn is cancelled; used to stop a run mid-story;
//   - "[demo:ignore-cancel]": with [demo:slow], the agent ignores
//     session/cancel, so the runner has to kill its process group after the
//     grace period;
//   - "[demo:ask-exec]": the agent asks permission (kind execute, options
//     "run" and "skip") before its terminal command too, and skips the
//     command when it is rejected;
//   - "[demo:attempt]": the file written gets K lines "attempt K" in attempt
//     K of a task file run several times (AIMI_ATTEMPT), so attempts differ;
//   - "[demo:slow-attempt-K]": attempt K waits as [demo:slow] does.
//
// A rejected permission ends the turn with refusal too; a cancelled one ends
// it with cancelled.
package demoagent
