#!/usr/bin/env bash
# Instructions per operation of the relay round trip, per process, from
# callgrind: instruction counts do not move with the machine's load, so a
# change to the hot path can be weighed on a shared machine.
#
#   scripts/relay-profile.sh [SMALL] [LARGE]   (default 200 and 1200 operations)
#
# Runs the relay bench's profile mode (`--ops N`: N sequential no-op calls,
# updates of things it creates first,
# through a satellite and a release testbed plugin) under
# `valgrind --tool=callgrind` twice, with SMALL and LARGE operations, and
# prints (LARGE - SMALL) / (LARGE - SMALL ops) for the bench process (caller
# and relay) and the plugin, then the same for raw NATS request/reply.
# nats-server (Go) is not run under valgrind. The callgrind files stay in
# target/relay-profile/ for `callgrind_annotate --inclusive=yes`.
# ORRERY_PROFILE_IN_FLIGHT=64 keeps that many calls in flight (the
# profile under load; default 1, sequential).
# ORRERY_PROFILE_BENCH and ORRERY_BENCH_PLUGIN name other binaries (an older
# build kept aside, to compare); then nothing is built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
small="${1:-200}"
large="${2:-1200}"
export CARGO_INCREMENTAL=0
ORRERY_NATS_SERVER="${ORRERY_NATS_SERVER:-$(scripts/ensure-nats.sh)}"
export ORRERY_NATS_SERVER
if [ -n "${ORRERY_PROFILE_BENCH:-}" ]; then
  bench="$ORRERY_PROFILE_BENCH"
else
  bench="$(scripts/bench-binary.sh relay)"
fi
target="$root/target"
export ORRERY_BENCH_PLUGIN="${ORRERY_BENCH_PLUGIN:-$target/release/orrery-plugin-testbed}"
out="$target/relay-profile${ORRERY_PROFILE_TAG:+-$ORRERY_PROFILE_TAG}"
rm -rf "$out"
mkdir -p "$out"

run() { # name ops [--raw]
  local dir="$out/$1-$2"
  mkdir -p "$dir"
  valgrind --tool=callgrind --trace-children=yes \
    --trace-children-skip='*nats-server*' \
    --callgrind-out-file="$dir/callgrind.out.%p" -q \
    "$bench" --ops "$2" --in-flight "${ORRERY_PROFILE_IN_FLIGHT:-1}" ${3:-} >/dev/null
}

# Instructions of every process of a run, by command name: "name Ir".
totals() {
  for f in "$1"/callgrind.out.*; do
    local cmd ir
    cmd="$(sed -n 's/^cmd: *//p' "$f" | awk '{print $1}' | xargs basename)"
    ir="$(sed -n 's/^summary: *//p;s/^totals: *//p' "$f" | head -1 | awk '{print $1}')"
    echo "$cmd $ir"
  done | awk '{s[$1] += $2} END {for (k in s) print k, s[k]}'
}

per_op() { # name
  join <(totals "$out/$1-$small" | sort) <(totals "$out/$1-$large" | sort) |
    awk -v n="$((large - small))" -v path="$1" \
      '{printf "| %s | %s | %.0f |\n", path, ($1 ~ /^relay/ ? "bench process" : $1), ($3 - $2) / n; t += ($3 - $2) / n}
       END {printf "| %s | total | %.0f |\n", path, t}'
}

run orrery "$small"
run orrery "$large"
run raw "$small" --raw
run raw "$large" --raw
echo "| path | process | instructions per operation |"
echo "|---|---|---:|"
per_op raw
per_op orrery
echo
echo "callgrind files: $out (e.g. callgrind_annotate --inclusive=yes $out/orrery-$large/callgrind.out.<pid>)"
