#!/usr/bin/env bash
# Runs the Node.js client suite (node --test) against a standalone mongosim, or against the
# replica set named by WATCHTREE_MONGODB_URI when it is set.
#
#   run.sh <mongosim binary> [test files...]
#
# The suite runs once per driver (package mongodb, 6.x; mongodb7, 7.x, when this Node.js is
# at least 20.19, as 7.x requires), both at once against the same server. mongosim is started
# on a free port and stopped whatever happens (success, failure, Ctrl-C).
set -euo pipefail
bin=${1:?usage: run.sh <mongosim binary> [test files...]}
shift
cd "$(dirname "$0")"
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(*.test.mjs)

node_at_least() { # major minor
	node -e "const [a,b]=process.versions.node.split('.').map(Number); process.exit(a>$1||(a==$1&&b>=$2)?0:1)"
}
drivers=(mongodb)
if node_at_least 20 19; then
	drivers+=(mongodb7)
else
	echo "test-clients: Node.js $(node --version) is older than 20.19: driver 7.x not run"
fi
testflags=(--test)
node_at_least 20 10 && testflags+=(--test-concurrency=4)

tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${WATCHTREE_MONGODB_URI:-}" ]; then
	echo "test-clients: against WATCHTREE_MONGODB_URI"
	uri=$WATCHTREE_MONGODB_URI
else
	"$bin" --port 0 >"$tmp/uri" 2>"$tmp/log" &
	pid=$!
	# mongosim prints its URI once it listens: poll for it for at most 10 s.
	for _ in $(seq 100); do
		[ -s "$tmp/uri" ] && break
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; echo "test-clients: mongosim exited" >&2; exit 1; }
		sleep 0.1
	done
	uri=$(head -n1 "$tmp/uri")
	[ -n "$uri" ] || { cat "$tmp/log" >&2; echo "test-clients: mongosim printed no URI" >&2; exit 1; }
	echo "test-clients: mongosim at $uri"
fi

declare -A runs
for d in "${drivers[@]}"; do
	MONGOSIM_URI="$uri" WATCHTREE_NODE_DRIVER="$d" node "${testflags[@]}" "${files[@]}" >"$tmp/$d.out" 2>&1 &
	runs[$d]=$!
done
rc=0
for d in "${drivers[@]}"; do
	if wait "${runs[$d]}"; then r=0; else r=$?; fi
	echo "=== driver package $d: exit $r"
	cat "$tmp/$d.out"
	[ $r -eq 0 ] || rc=$r
done
if [ -s "$tmp/log" ]; then
	echo "--- mongosim stderr ---"
	cat "$tmp/log"
fi
exit $rc
