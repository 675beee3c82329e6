#!/usr/bin/env bash
# bench-cli-cpu.sh ls BIN FULL EMPTY [ROUNDS]
# bench-cli-cpu.sh exec BIN STATE ID [ROUNDS]
#
# The CPU time (perf's task-clock) of agentbox CLI commands, medians of
# ROUNDS (default 20) runs alternated with their baseline: on a machine
# shared with other work, the wall-clock of a 30 ms process varies with the
# load far more than its CPU time does (fastbench gives the wall-clock).
#   ls:   `BIN --state-dir FULL sandbox ls` against the same on EMPTY.
#   exec: `BIN --state-dir STATE exec --id ID -- true` against `sh -c true`.
# Needs perf and python3.
set -euo pipefail
mode=$1 bin=$2
cpu() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
case $mode in
ls)
	full=$3 empty=$4 n=${5:-20}
	for _ in $(seq "$n"); do
		echo "op $(cpu "$bin" --state-dir "$full" sandbox ls)"
		echo "base $(cpu "$bin" --state-dir "$empty" sandbox ls)"
	done ;;
exec)
	state=$3 id=$4 n=${5:-20}
	for _ in $(seq "$n"); do
		echo "op $(cpu "$bin" --state-dir "$state" exec --id "$id" -- true)"
		echo "base $(cpu sh -c true)"
	done ;;
*)
	echo "usage: $0 ls BIN FULL EMPTY [ROUNDS] | exec BIN STATE ID [ROUNDS]" >&2
	exit 2 ;;
esac | python3 -c '
import sys, statistics as st
v = {}
for line in sys.stdin:
    k, x = line.split()
    v.setdefault(k, []).append(float(x))
op, base = st.median(v["op"]), st.median(v["base"])
print("op %.1f ms CPU, baseline %.1f ms CPU, ratio %.2f" % (op, base, op / base))'
