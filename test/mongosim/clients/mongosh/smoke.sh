#!/usr/bin/env bash
# make test-mongosh: a mongosh smoke run against a standalone mongosim.
#
#   smoke.sh <mongosim binary>
#
# 1. mongosh --file smoke.js: version, rs.status(), insert, find, watch/tryNext, currentOp,
#    stats, validate, explain, show dbs, the replication info.
# 2. An interactive session fed from a pipe for several heartbeat periods: every prompt must
#    show [primary] (mongosh derives it from its monitor's view of the server).
set -euo pipefail
bin=${1:?usage: smoke.sh <mongosim binary>}
cd "$(dirname "$0")"
mongosh=./node_modules/.bin/mongosh
want=$(node -p "require('./node_modules/mongosh/package.json').version")
export DO_NOT_TRACK=1 # no telemetry

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

"$bin" --port 0 >"$tmp/uri" 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do
	[ -s "$tmp/uri" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/log" >&2; echo "test-mongosh: mongosim exited" >&2; exit 1; }
	sleep 0.1
done
uri=$(head -n1 "$tmp/uri")
echo "test-mongosh: mongosh $want against mongosim at $uri"

WANT_MONGOSH=$want "$mongosh" "$uri" --quiet --file smoke.js

# The prompt: 6 commands over about 6 s (several streamed heartbeats and pool checkouts).
printf 'db.hello().isWritablePrimary\nsleep(1000)\ndb.getSiblingDB("smoke").c.countDocuments()\nsleep(2000)\nrs.status().myState\nsleep(2000)\nexit\n' |
	"$mongosh" "$uri" >"$tmp/session" 2>&1 || { cat "$tmp/session"; exit 1; }
prompts=$(grep -c '^rs0 \[' "$tmp/session" || true)
primary=$(grep -c '^rs0 \[primary\]' "$tmp/session" || true)
echo "test-mongosh: $primary of $prompts prompts show [primary]"
if [ "$prompts" -lt 6 ] || [ "$primary" -ne "$prompts" ]; then
	cat "$tmp/session"
	echo "test-mongosh: FAIL: every prompt must show [primary]" >&2
	exit 1
fi
echo "test-mongosh: ok"
