#!/usr/bin/env bash
# bench-fastpath.sh [REV ...]: issue 29's fast-path table, before and after,
# root and rootless, in one sitting.
#
# For each REV (default: the merge-base of HEAD with main, then the working
# tree, "WORKTREE"), it makes a temporary git worktree (the working tree is
# used as it is), copies internal/cmd/fastbench into it when that rev has
# none, and builds the harness and the agentbox CLI of that rev. Then, row
# by row, it runs the harness of each rev in turn, as root and as an
# ordinary user (setpriv --reuid 2001 --regid 2001 --clear-groups, a fresh
# HOME and state dir, binaries copied where that uid can read them), and
# prints one table with a column per rev × {root, rootless}. A row a mode
# cannot run shows its error; nothing aborts the sitting.
#
# Must run as root. Environment: ROUNDS (default 10), ROWS (default all),
# RUNAS_UID (default 2001), KEEP=1 keeps the temporary folder.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "bench-fastpath.sh: run as root (it measures root and, through setpriv, rootless)" >&2
	exit 2
fi
repo=$(git rev-parse --show-toplevel)
cd "$repo"
rounds=${ROUNDS:-10}
rows=${ROWS:-create,pool,cli,pss,concurrent,stream,ls,exec}
uid=${RUNAS_UID:-2001}
revs=("$@")
if [ ${#revs[@]} -eq 0 ]; then
	revs=("$(git merge-base HEAD main)" WORKTREE)
fi

tmp=$(mktemp -d /tmp/bench-fastpath.XXXXXX)
chmod 755 "$tmp"
worktrees=()
cleanup() {
	for w in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$w" >/dev/null 2>&1 || true; done
	if [ "${KEEP:-}" != 1 ]; then rm -rf "$tmp"; else echo "kept $tmp" >&2; fi
}
trap cleanup EXIT

labels=()
for i in "${!revs[@]}"; do
	rev=${revs[$i]}
	src=$repo
	if [ "$rev" != WORKTREE ]; then
		src=$tmp/src$i
		git worktree add --detach "$src" "$rev" >/dev/null 2>&1
		worktrees+=("$src")
		if [ ! -d "$src/internal/cmd/fastbench" ]; then
			mkdir -p "$src/internal/cmd"
			cp -r "$repo/internal/cmd/fastbench" "$src/internal/cmd/"
			echo "rev $rev: harness source copied from the working tree" >&2
		fi
		label=$(git rev-parse --short "$rev")
	else
		label="worktree($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes))"
	fi
	bin=$tmp/bin$i
	mkdir -p "$bin"
	(cd "$src" && go build -o "$bin/fastbench" ./internal/cmd/fastbench && go build -o "$bin/agentbox" ./cmd/agentbox)
	chmod -R a+rX "$bin"
	labels+=("$label")
done

home=$tmp/home
mkdir -p "$home"
chown "$uid:$uid" "$home"
chmod 700 "$home"
mkdir -p "$tmp/out" && chmod 777 "$tmp/out"

# run BIN MODE ROW OUT: one row of one rev in one mode.
run() {
	local bin=$1 mode=$2 row=$3 out=$4
	local args=(-rows "$row" -rounds "$rounds" -cli "$bin/agentbox" -json "$out")
	if [ "$mode" = root ]; then
		"$bin/fastbench" "${args[@]}" -state-dir "$tmp/state-root" >/dev/null || true
	else
		setpriv --reuid "$uid" --regid "$uid" --clear-groups \
			env -i HOME="$home" TMPDIR="$home" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			"$bin/fastbench" "${args[@]}" -state-dir "$home/state" >/dev/null || true
	fi
}

echo "sitting: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg), rounds $rounds" >&2
merge=()
IFS=, read -ra rowlist <<<"$rows"
for row in "${rowlist[@]}"; do
	for i in "${!revs[@]}"; do
		for mode in root rootless; do
			out=$tmp/out/$row-$i-$mode.json
			echo "row $row, ${labels[$i]}, $mode ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))" >&2
			run "$tmp/bin$i" "$mode" "$row" "$out"
			if [ -s "$out" ]; then
				merge+=("${labels[$i]} $mode=$out")
			else
				echo "  (no result: the harness failed; see above)" >&2
			fi
		done
	done
done
echo "sitting ended: $(date -u '+%H:%M:%S UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$tmp/bin$((${#revs[@]} - 1))/fastbench" -merge "${merge[@]}"
