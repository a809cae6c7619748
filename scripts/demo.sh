#!/usr/bin/env bash
# make demo: a whole swarm on this machine, with no API key and no network.
#
# Builds the binaries and the sandbox image, makes a fresh demo repository in
# .demo/repo with five task files (a linear chain, a diamond, independent
# roots, and a pair that writes one file two ways), starts aimid in the
# background on a socket and data dir under .demo/, runs `aimi swarm start
# --all --local --follow` on the built-in demo agent, then prints the swarm
# status (with the conflict radar's line for the pair), the branches the
# containers pushed and one container's journal, checks that every container
# completed and the state file is valid, and lands the five branches with
# `aimi swarm land`: the pair's conflict goes to a fix-up sandbox whose demo
# agent keeps both sides, and the integration branch holds all the work. On exit (also on failure or Ctrl-C) it removes the
# demo containers and stops aimid; .demo/ stays for inspection (aimid.log,
# repo/) until the next run or `make demo-clean`.
#
#   bash scripts/demo.sh          run the demo
#   bash scripts/demo.sh clean    stop a leftover demo daemon, remove its containers and .demo/
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEMO="$ROOT/.demo"
REPO="$DEMO/repo"
DATA="$DEMO/data"
LOG="$DEMO/aimid.log"
PIDFILE="$DEMO/aimid.pid"
BIN="$ROOT/bin"
# The socket's directory must be its own (aimid makes it 0700).
SOCK="$DEMO/run/aimid.sock"
# A unix socket path must fit in 108 bytes; from a deep checkout use /tmp.
if [ "${#SOCK}" -gt 100 ]; then
	SOCK="${TMPDIR:-/tmp}/aimi-demo-$(id -u)/aimid.sock"
fi
export AIMI_SOCKET="$SOCK"

# ---- agent selection ----------------------------------------------------
# The demo runs the built-in deterministic agent (no model, no network).
# agent.* keys apply daemon-wide (a repo's .aimi/config.yaml cannot change
# them), so the demo's daemon gets its own config file (--config, written
# below) instead of the user's ~/.config/aimi/config.yaml, and none of the
# caller's AIMI_* variables.
DEMO_AGENT_KIND="${DEMO_AGENT_KIND:-demo}"
SANDBOX_IMAGE="${SANDBOX_IMAGE:-aimi-sandbox:latest}"
DEMO_BRANCHES="demo/linear demo/diamond demo/roots demo/greeting-en demo/greeting-fr"
CONFIG="$DEMO/aimid.yaml"
# --------------------------------------------------------------------------

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
aimi() { "$BIN/aimi" "$@"; }

daemon_alive() {
	[ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

# stop_daemon sends SIGTERM (containers would keep running: the cleanup
# before it removes them) and waits for the exit.
stop_daemon() {
	daemon_alive || { rm -f "$PIDFILE"; return 0; }
	local pid
	pid=$(cat "$PIDFILE")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "aimid (pid $pid) did not stop in 10s; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$PIDFILE"
}

# cleanup_swarm removes the demo's containers and networks through the
# daemon; --force because the demo's branches are already in the repository.
cleanup_swarm() {
	daemon_alive || return 0
	[ -d "$REPO" ] || return 0
	aimi swarm cleanup --force --repo "$REPO" --socket "$SOCK" >/dev/null 2>&1 || true
}

start_daemon() {
	mkdir -p "$DATA" "$(dirname "$SOCK")"
	# AIMI_LOG_LEVEL=warn keeps acp-runner's info logs (its stderr) out of
	# the journal shown at the end, where they appear as non-message lines.
	cat >"$CONFIG" <<EOF
sandbox:
  image: $SANDBOX_IMAGE
agent:
  kind: $DEMO_AGENT_KIND
  env:
    AIMI_LOG_LEVEL: warn
git:
  mode: local
EOF
	local unset=() v
	for v in $(env | sed -n 's/^\(AIMI_[A-Za-z0-9_]*\)=.*/\1/p'); do
		[ "$v" = AIMI_SOCKET ] || unset+=(-u "$v")
	done
	env ${unset[@]+"${unset[@]}"} "$BIN/aimid" --config "$CONFIG" --socket "$SOCK" --data-dir "$DATA" --instance "aimi-demo-$(id -u)" >"$LOG" 2>&1 &
	echo $! >"$PIDFILE"
	# Ready when the CLI reaches it: exit 3 means "no daemon on the socket".
	for _ in $(seq 1 150); do
		if ! daemon_alive; then
			echo "aimid exited during start; the end of $LOG:" >&2
			tail -n 30 "$LOG" >&2 || true
			return 1
		fi
		# status answers from the state file while no daemon listens, so
		# the socket must exist first.
		local rc=3
		if [ -S "$SOCK" ]; then
			rc=0
			aimi swarm status --repo "$REPO" --socket "$SOCK" >/dev/null 2>&1 || rc=$?
		fi
		if [ "$rc" -ne 3 ]; then
			echo "aimid is up (pid $(cat "$PIDFILE")), socket $SOCK, log $LOG"
			return 0
		fi
		sleep 0.2
	done
	echo "aimid did not answer on $SOCK within 30s; the end of $LOG:" >&2
	tail -n 30 "$LOG" >&2 || true
	return 1
}

on_exit() {
	local rc=$?
	set +e
	if daemon_alive; then
		say "cleaning up: demo containers, then aimid"
		cleanup_swarm
		stop_daemon
	fi
	if [ "$rc" -ne 0 ]; then
		echo "demo failed (exit $rc); daemon log: $LOG" >&2
	fi
	exit "$rc"
}

# write_task FILE BRANCH TITLE TYPE MAXCONC STORIES...
# Each story is "ID|DEPS(comma-separated)|FILE": the demo agent writes the
# file named in the "File ... exists" criterion, so the branches show work.
write_task() {
	local file=$1 branch=$2 title=$3 type=$4 maxc=$5
	shift 5
	local prio=0 first=1
	{
		printf '{\n  "schemaVersion": "3.0",\n  "metadata": {\n'
		printf '    "title": "%s",\n    "type": "%s",\n    "branchName": "%s",\n' "$title" "$type" "$branch"
		printf '    "createdAt": "%s",\n    "planPath": null,\n    "maxConcurrency": %s\n  },\n  "userStories": [\n' "$(date -u +%F)" "$maxc"
		for s in "$@"; do
			local id deps out deplist=""
			IFS='|' read -r id deps out <<<"$s"
			prio=$((prio + 1))
			if [ -n "$deps" ]; then
				deplist=$(printf '"%s", ' ${deps//,/ })
				deplist=${deplist%, }
			fi
			[ "$first" = 1 ] || printf ',\n'
			first=0
			printf '    {\n      "id": "%s",\n      "title": "%s: write %s",\n' "$id" "$title" "$out"
			printf '      "description": "As a demo user, I want %s so that the branch shows the work of story %s.",\n' "$out" "$id"
			printf '      "acceptanceCriteria": ["File %s exists", "Typecheck passes"],\n' "$out"
			printf '      "priority": %d,\n      "status": "pending",\n      "dependsOn": [%s],\n      "notes": ""\n    }' "$prio" "$deplist"
		done
		printf '\n  ]\n}\n'
	} >"$file"
}

make_repo() {
	rm -rf "$REPO"
	mkdir -p "$REPO/.aimi/tasks"
	git -C "$REPO" init -q -b main
	git -C "$REPO" config user.name "aimi demo"
	git -C "$REPO" config user.email "demo@aimi.invalid"
	cat >"$REPO/README.md" <<'EOF'
# aimi swarm demo repository

Made by `make demo`. Each task file under .aimi/tasks becomes one sandbox
container; each container works on its own branch.
EOF
	cat >"$REPO/.gitignore" <<'EOF'
# Written by aimid while a swarm runs; not part of the project.
.aimi/swarm-state.json
.aimi/swarm-state.json.*
.aimi/swarm/
EOF
	# Per-repo config: the daemon's own git service (this repository has no
	# origin to push to).
	cat >"$REPO/.aimi/config.yaml" <<'EOF'
git:
  mode: local
EOF
	local day
	day=$(date -u +%F)
	write_task "$REPO/.aimi/tasks/$day-demo-linear-tasks.json" demo/linear "demo: linear chain" feat 1 \
		"US-101||linear-one.md" "US-102|US-101|linear-two.md" "US-103|US-102|linear-three.md"
	write_task "$REPO/.aimi/tasks/$day-demo-diamond-tasks.json" demo/diamond "demo: diamond" feat 2 \
		"US-201||diamond-top.md" "US-202|US-201|diamond-left.md" "US-203|US-201|diamond-right.md" "US-204|US-202,US-203|diamond-bottom.md"
	write_task "$REPO/.aimi/tasks/$day-demo-roots-tasks.json" demo/roots "demo: independent roots" ref 0 \
		"US-301||roots-a.md" "US-302||roots-b.md" "US-303|US-301,US-302|roots-joined.md"
	# A pair that writes one file two ways: the radar sees the conflict
	# while they work, and the land hands it to a fix-up agent.
	write_task "$REPO/.aimi/tasks/$day-demo-greeting-en-tasks.json" demo/greeting-en "demo: greeting in English" feat 1 \
		"US-401||greeting.md"
	write_task "$REPO/.aimi/tasks/$day-demo-greeting-fr-tasks.json" demo/greeting-fr "demo: greeting in French" feat 1 \
		"US-501||greeting.md"
	git -C "$REPO" add -A
	git -C "$REPO" commit -q -m "demo: README and five task files"
}

clean() {
	cleanup_swarm
	stop_daemon
	rm -rf "$DEMO"
	case "$SOCK" in "$DEMO"/*) ;; *) rm -rf "$(dirname "$SOCK")" ;; esac
	echo "demo cleaned"
}

main() {
	if [ "${1:-}" = clean ]; then
		clean
		return
	fi
	cd "$ROOT"
	local t0=$SECONDS

	say "build: aimi, aimid, acp-runner"
	run make --no-print-directory build

	say "sandbox image (cached after the first run)"
	run make --no-print-directory sandbox-image

	say "fresh demo repository in $REPO"
	# A daemon left by an earlier run that was killed hard goes first.
	cleanup_swarm
	stop_daemon
	rm -rf "$DEMO"
	mkdir -p "$DEMO"
	make_repo
	git -C "$REPO" log --oneline
	ls "$REPO/.aimi/tasks"

	say "start aimid"
	trap on_exit EXIT
	trap 'exit 130' INT TERM
	start_daemon
	# Containers a killed earlier run left behind carry this repo's label;
	# the daemon adopts them at start, so clear them before the new swarm.
	cleanup_swarm

	say "run the swarm: five containers, demo agent, local git service"
	local rc=0
	run aimi swarm start --all --local --follow --repo "$REPO" --socket "$SOCK" || rc=$?

	say "aimi swarm status (the conflict radar's line is under the table)"
	# The radar looks right after each push; give its last look a moment.
	for _ in $(seq 1 50); do
		aimi swarm status --json --repo "$REPO" --socket "$SOCK" 2>/dev/null | grep -q '"kind": "conflict"' && break
		sleep 0.2
	done
	run aimi swarm status --repo "$REPO" --socket "$SOCK" || true

	say "branches the containers pushed (fetched into the demo repository)"
	# The daemon publishes a branch into the checkout just after its
	# container completes; give it a moment.
	for b in $DEMO_BRANCHES; do
		for _ in $(seq 1 150); do
			git -C "$REPO" rev-parse -q --verify "refs/heads/$b" >/dev/null && break
			sleep 0.2
		done
	done
	run git -C "$REPO" branch -v
	local missing=""
	for b in $DEMO_BRANCHES; do
		if git -C "$REPO" rev-parse -q --verify "refs/heads/$b" >/dev/null; then
			echo "-- $b:"
			git -C "$REPO" log --format='   %h %s' "main..$b"
		else
			missing="$missing $b"
		fi
	done

	local name
	name=$(sed -n 's/.*"containerName": *"\([^"]*diamond[^"]*\)".*/\1/p' "$REPO/.aimi/swarm-state.json" 2>/dev/null | head -n 1)
	if [ -n "$name" ]; then
		say "journal of $name"
		run aimi swarm logs "$name" --repo "$REPO" --socket "$SOCK" || true
	fi

	say "check: every container completed, state file valid"
	run go run ./scripts/checkstate -repo "$REPO" -want 5

	say "land the swarm: one branch, its conflict fixed by an agent in a sandbox"
	local lrc=0
	run aimi swarm land --repo "$REPO" --socket "$SOCK" || lrc=$?
	local landed
	landed=$(git -C "$REPO" for-each-ref --format='%(refname:short)' 'refs/heads/aimi/land/*' | grep -v -- '--fix-' | head -n 1)
	if [ -n "$landed" ]; then
		run git -C "$REPO" log --oneline --first-parent "main..$landed"
		run git -C "$REPO" show "$landed:greeting.md"
	fi

	if [ "$rc" -ne 0 ]; then
		echo "aimi swarm start exited $rc" >&2
		return "$rc"
	fi
	if [ -n "$missing" ]; then
		echo "branches not published into $REPO:$missing (see $LOG)" >&2
		return 1
	fi
	if [ "$lrc" -ne 0 ] || [ -z "$landed" ]; then
		echo "aimi swarm land exited $lrc (integration branch: ${landed:-none}; see $LOG)" >&2
		return 1
	fi
	say "demo done in $((SECONDS - t0))s; files in $DEMO (aimid.log, repo/); 'make demo-clean' removes them"
}

# Run only when executed, so tests can source the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
