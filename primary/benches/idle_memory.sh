#!/usr/bin/env bash
# Memory comes back (issue 44, item 4): a release `orrery primary` runs
# five commands of 100,000 resources each (five stacks, testbed things
# that answer at once), one after the other, and then idles.
#
#   primary/benches/idle_memory.sh [RUNS]      (default 3 runs)
#
# Prints, per run, the primary's resident memory (VmRSS) when it has just
# started, its peak (VmHWM), and its VmRSS 10 s after the last command
# ended, with the ratio of the last to the first. The target on this
# machine: under 600 MiB after the five commands.
# ORRERY_BENCH_BUILD=0 uses the binaries already in target/release;
# ORRERY_BENCH_RESOURCES and ORRERY_BENCH_COMMANDS change the sizes.
set -euo pipefail

RUNS=${1:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

if [ "${ORRERY_BENCH_BUILD:-1}" != 0 ]; then
    # Two builds: `--bin orrery` would apply to the testbed package too.
    cargo build --release -q -p orrery-primary --bin orrery
    cargo build --release -q -p orrery-plugin-testbed
fi
BIN="$ROOT/target/release"
RESOURCES=${ORRERY_BENCH_RESOURCES:-100000}
COMMANDS=${ORRERY_BENCH_COMMANDS:-5}
TOKEN=orr_bench_admin_0123456789abcdef0123456789abcdef
TOKEN_SHA=$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)

kib() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }

echo "| run | commands × resources | RSS at start (MiB) | peak (MiB) | RSS 10 s after the last (MiB) | after / start |"
echo "|---|---|---:|---:|---:|---:|"
for run in $(seq 1 "$RUNS"); do
    WORK=$(mktemp -d)
    printf '[[principal]]\nname = "bench"\ntoken_sha256 = "%s"\nroles = ["admin"]\n' "$TOKEN_SHA" > "$WORK/tokens.toml"
    PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    ORRERY_PLUGIN_DIR="$BIN" "$BIN/orrery" primary --listen "127.0.0.1:$PORT" \
        --data-dir "$WORK/state" --auth-tokens "$WORK/tokens.toml" >>"$WORK/log" 2>&1 &
    PID=$!
    trap 'kill $PID 2>/dev/null || true' EXIT
    for _ in $(seq 1 200); do
        curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
        sleep 0.1
    done
    START=$(kib "$PID" VmRSS)
    for c in $(seq 1 "$COMMANDS"); do
        # One declaration with `count`: a literal document that big passes
        # the parser's node limit.
        printf 'stack: big%d\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {}\nresources:\n  - label: r\n    type: Testbed::Noop::Thing\n    target: lab\n    count: %d\n    properties: { name: "big%d-r${count.index}", value: 1 }\n' "$c" "$RESOURCES" "$c" |
            python3 -c 'import json, sys; print(json.dumps({"document": sys.stdin.read()}))' > "$WORK/body.json"
        ID=$(curl -sf -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
            --data-binary @"$WORK/body.json" "http://127.0.0.1:$PORT/v1/stacks/apply" |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["command_id"])')
        for _ in $(seq 1 6000); do
            STATUS=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/commands/$ID?limit=1" |
                python3 -c 'import json, sys; c = json.load(sys.stdin); print(c["status"] if not c["active"] else "running")')
            [ "$STATUS" != running ] && break
            sleep 0.2
        done
        [ "$STATUS" = completed ] || { echo "command $c ended $STATUS" >&2; tail -5 "$WORK/log" >&2; exit 1; }
    done
    # Idle: what the process keeps, not what it is still freeing.
    sleep 10
    AFTER=$(kib "$PID" VmRSS)
    PEAK=$(kib "$PID" VmHWM)
    printf '| %d | %d × %d | %s | %s | %s | %.2f |\n' "$run" "$COMMANDS" "$RESOURCES" \
        "$(mib "$START")" "$(mib "$PEAK")" "$(mib "$AFTER")" "$(awk -v a="$AFTER" -v s="$START" 'BEGIN { print a / s }')"
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    rm -rf "$WORK"
done
