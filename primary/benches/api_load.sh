#!/usr/bin/env bash
# The HTTP API under load (issue 17, item 7): a release `orrery primary`
# holding one 10,000-resource stack, loaded by `wrk` from a second process.
#
#   primary/benches/api_load.sh [RUNS]      (default 3 runs)
#
# Each run starts a fresh primary, applies the stack (testbed things that
# answer at once), restarts the primary over the same store (so that the
# apply's memory is not counted), then measures, in this order, reading the
# primary's peak RSS (VmHWM) after each phase:
#   1. GET /v1/resources?stack=big&limit=1000  — 8 connections, 20 s
#   2. GET /v1/stacks                           — 32 connections, 20 s
#      and GET /healthz at 32 (the baseline of the same HTTP, TLS-less
#      transport and token check, with no store behind it)
#   3. GET /v1/commands/{apply}?limit=1000      — 8 connections, 20 s
#   4. every page of GET /v1/resources?stack=big&limit=1000, one client
#      following next_cursor to the end (how long, how many resources)
#   5. GET /v1/resources?stack=big&all=true (all 10,000) — 8 connections, 20 s
# (the last, unpaged, is the baseline of issue 17's figures; the primary
# runs with --max-list-items as large as the stack, so it is answered),
# and prints one markdown row per phase.
# ORRERY_BENCH_RESOURCES=100000 makes the stack that big (default 10000);
# ORRERY_BENCH_PHASES=walk runs only phase 4 (the page walk). Needs root (or wrk installed) to
# install Debian's `wrk` when it is missing.
set -euo pipefail

RUNS=${1:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

if ! command -v wrk >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q wrk >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q wrk >/dev/null; }
    else
        echo "wrk is missing: install Debian's package \`wrk\`" >&2
        exit 1
    fi
fi

# ORRERY_BENCH_PROFILE=debug and a short ORRERY_BENCH_DURATION make a smoke
# run of this script; its figures mean nothing. ORRERY_BENCH_BUILD=0 uses
# the binaries already built.
PROFILE=${ORRERY_BENCH_PROFILE:-release}
DURATION=${ORRERY_BENCH_DURATION:-20s}
if [ "${ORRERY_BENCH_BUILD:-1}" = 0 ]; then
    : # the binaries in target/$PROFILE as they are
elif [ "$PROFILE" = release ]; then
    # Two builds: `--bin orrery` would apply to the testbed package too.
    cargo build --release -q -p orrery-primary --bin orrery
    cargo build --release -q -p orrery-plugin-testbed
else
    cargo build -q -p orrery-primary --bin orrery
    cargo build -q -p orrery-plugin-testbed
fi
BIN="$ROOT/target/$PROFILE"
# Where the testbed plugin is (it only serves the apply, not the load).
PLUGINS=${ORRERY_BENCH_PLUGIN_DIR:-$BIN}

RESOURCES=${ORRERY_BENCH_RESOURCES:-10000}
PHASES=${ORRERY_BENCH_PHASES:-all}

TOKEN=orr_bench_admin_0123456789abcdef0123456789abcdef
TOKEN_SHA=$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)

stack() {
    printf 'stack: big\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {}\nresources:\n'
    if [ "$RESOURCES" -gt 10000 ]; then
        # A literal document that big passes the parser's node limit
        # (1,000,000): one declaration with `count` instead.
        printf '  - label: r\n    type: Testbed::Noop::Thing\n    target: lab\n    count: %d\n    properties: { name: "r${count.index}", value: 1 }\n' "$RESOURCES"
        return
    fi
    for i in $(seq 0 $((RESOURCES - 1))); do
        printf '  - label: r%05d\n    type: Testbed::Noop::Thing\n    target: lab\n    properties: { name: r%d, value: %d }\n' "$i" "$i" "$i"
    done
}

# Starts the primary on $PORT over $WORK/state (PID), waits for /healthz.
start_primary() {
    ORRERY_PLUGIN_DIR="$PLUGINS" "$BIN/orrery" primary --listen "127.0.0.1:$PORT" \
        --data-dir "$WORK/state" --auth-tokens "$WORK/tokens.toml" \
        --max-list-items "$RESOURCES" >>"$WORK/log" 2>&1 &
    PID=$!
    trap 'kill $PID 2>/dev/null || true' EXIT
    for _ in $(seq 1 200); do
        curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return
        sleep 0.1
    done
    echo "the primary did not answer /healthz" >&2
    exit 1
}

hwm_mib() { awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

# wrk's summary → "req/s p50 p99".
measure() {
    local conns=$1 path=$2
    wrk -t "$(( conns < 8 ? conns : 8 ))" -c "$conns" -d "$DURATION" --latency \
        -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT$path" |
        awk '/Requests\/sec/ { rps = $2 } / 50% / { p50 = $2 } / 99% / { p99 = $2 } END { print rps, p50, p99 }'
}

# One client reads every page, following next_cursor → "seconds resources pages".
walk() {
    python3 - "$PORT" "$TOKEN" <<'PY'
import json, sys, time, urllib.parse, urllib.request
port, token = sys.argv[1], sys.argv[2]
cursor, count, pages, started = None, 0, 0, time.monotonic()
while True:
    query = {"stack": "big", "limit": "1000"}
    if cursor:
        query["cursor"] = cursor
    url = f"http://127.0.0.1:{port}/v1/resources?" + urllib.parse.urlencode(query)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    page = json.load(urllib.request.urlopen(request))
    count += len(page["resources"])
    pages += 1
    cursor = page.get("next_cursor")
    if not cursor:
        break
print(f"{time.monotonic() - started:.1f}", count, pages)
PY
}

echo "| run | endpoint | connections | requests/s | p50 | p99 | primary peak RSS after (MiB) |"
echo "|---|---|---:|---:|---:|---:|---:|"
for run in $(seq 1 "$RUNS"); do
    WORK=$(mktemp -d)
    printf '[[principal]]\nname = "bench"\ntoken_sha256 = "%s"\nroles = ["admin"]\n' "$TOKEN_SHA" > "$WORK/tokens.toml"
    PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start_primary
    stack | python3 -c 'import json, sys; print(json.dumps({"document": sys.stdin.read()}))' > "$WORK/body.json"
    ID=$(curl -sf -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        --data-binary @"$WORK/body.json" "http://127.0.0.1:$PORT/v1/stacks/apply" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["command_id"])')
    for _ in $(seq 1 6000); do
        STATUS=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/commands/$ID?limit=1" |
            python3 -c 'import json, sys; c = json.load(sys.stdin); print(c["status"] if not c["active"] else "running")')
        [ "$STATUS" != running ] && break
        sleep 0.1
    done
    [ "$STATUS" = completed ] || { echo "the apply ended $STATUS" >&2; exit 1; }
    # A fresh process over the same store: its peak RSS is the API's under
    # load, not the apply's (which the phases would otherwise inherit).
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    start_primary
    echo "| $run | (idle, after a restart over the applied store) | | | | | $(hwm_mib $PID) |"
    if [ "$PHASES" = all ]; then
        read -r rps p50 p99 <<<"$(measure 8 '/v1/resources?stack=big&limit=1000')"
        echo "| $run | \`/v1/resources?stack=big&limit=1000\` | 8 | $rps | $p50 | $p99 | $(hwm_mib $PID) |"
        read -r rps p50 p99 <<<"$(measure 32 '/v1/stacks')"
        echo "| $run | \`/v1/stacks\` | 32 | $rps | $p50 | $p99 | $(hwm_mib $PID) |"
        read -r rps p50 p99 <<<"$(measure 32 '/healthz')"
        echo "| $run | \`/healthz\` (baseline) | 32 | $rps | $p50 | $p99 | $(hwm_mib $PID) |"
        read -r rps p50 p99 <<<"$(measure 8 "/v1/commands/$ID?limit=1000")"
        echo "| $run | \`/v1/commands/{id}?limit=1000\` | 8 | $rps | $p50 | $p99 | $(hwm_mib $PID) |"
    fi
    read -r secs count pages <<<"$(walk)"
    echo "| $run | every page of \`/v1/resources?stack=big&limit=1000\` ($count resources, $pages pages, ${secs} s) | 1 | | | | $(hwm_mib $PID) |"
    # Last: the unpaged listing drives the peak far above the others'.
    if [ "$PHASES" = all ]; then
        read -r rps p50 p99 <<<"$(measure 8 '/v1/resources?stack=big&all=true')"
        echo "| $run | \`/v1/resources?stack=big&all=true\` (all) | 8 | $rps | $p50 | $p99 | $(hwm_mib $PID) |"
    fi
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    trap - EXIT
    rm -rf "$WORK"
done
