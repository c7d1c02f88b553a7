#!/usr/bin/env bash
# Instructions per operation of the tracing bench's round trip under each
# telemetry setting, per process, from callgrind: what tracing costs,
# weighed without the machine's load in the figure.
#
#   scripts/tracing-profile.sh [SMALL] [LARGE]   (default 2000 and 10000 operations)
#
# Runs the tracing bench's worker (`ORRERY_TRACING_BENCH_MODE`: caller and
# relay in one process, its plugin a child; logs JSON at `info` as
# deployed) under `valgrind --tool=callgrind` with SMALL and LARGE calls at
# 64 in flight, for `export off`, 0 %, 1 % and 100 % sampling (OTLP/HTTP
# to a sink that answers 200), and prints (LARGE - SMALL) / (LARGE - SMALL
# ops) per process. 0 % (exporting, nothing sampled) is what every request
# pays; 1 % moves by about +-150 between runs with how many calls the
# sampler happened to pick, so 0 % plus a hundredth of (100 % - export off)
# is the steadier figure for it. nats-server and the sink are not run under valgrind.
# `--cache-sim=yes` as the first argument adds first-level instruction
# cache misses (I1mr) per operation (a simulation: slower).
# The callgrind files stay in target/tracing-profile/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cache_sim=no
if [ "${1:-}" = "--cache-sim=yes" ]; then
  cache_sim=yes
  shift
fi
small="${1:-2000}"
large="${2:-10000}"
export CARGO_INCREMENTAL=0
nats="${ORRERY_NATS_SERVER:-$(scripts/ensure-nats.sh)}"
bench="$(scripts/bench-binary.sh tracing)"
out="$root/target/tracing-profile"
rm -rf "$out"
mkdir -p "$out"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$nats" -a 127.0.0.1 -p "$port" >"$out/nats.log" 2>&1 &
nats_pid=$!
sink_port_file="$out/sink.port"
python3 - "$sink_port_file" >"$out/sink.log" 2>&1 <<'EOF' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
EOF
sink_pid=$!
trap 'kill $nats_pid $sink_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  [ -s "$sink_port_file" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
[ -s "$sink_port_file" ] || { echo "the OTLP sink did not start" >&2; exit 1; }

run() { # name ops ratio
  local dir="$out/$1-$2"
  mkdir -p "$dir"
  local mode=off
  local -a otel=()
  if [ -n "$3" ]; then
    mode=export
    otel=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$sink_port_file")"
      OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG="$3")
  fi
  env -u OTEL_EXPORTER_OTLP_ENDPOINT "${otel[@]}" RUST_LOG=info \
    ORRERY_TRACING_BENCH_MODE="$mode" BENCH_N_SEQ=10 BENCH_N_PAR="$2" \
    BENCH_NATS_URL="nats://127.0.0.1:$port" \
    BENCH_PLUGIN="$root/target/release/orrery-plugin-testbed" \
    valgrind --tool=callgrind --cache-sim="$cache_sim" --trace-children=yes \
    --callgrind-out-file="$dir/callgrind.out.%p" -q "$bench" >/dev/null 2>"$dir/err"
}

# One line per process of a run: "name Ir [I1mr]".
totals() {
  for f in "$1"/callgrind.out.*; do
    local cmd
    cmd="$(sed -n 's/^cmd: *//p' "$f" | awk '{print $1}' | xargs basename)"
    echo "$cmd $(sed -n 's/^summary: *//p;s/^totals: *//p' "$f" | head -1 | awk '{print $1, $2}')"
  done | awk '{ir[$1] += $2; mr[$1] += $3} END {for (k in ir) print k, ir[k], mr[k]}'
}

per_op() { # name
  join <(totals "$out/$1-$small" | sort) <(totals "$out/$1-$large" | sort) |
    awk -v n="$((large - small))" -v setting="${1/pct/ %}" -v sim="$cache_sim" '
      {name = ($1 ~ /^tracing/ ? "worker (caller + relay)" : $1)
       ir = ($4 - $2) / n; t += ir
       if (sim == "yes") { mr = ($5 - $3) / n; tm += mr; printf "| %s | %s | %.0f | %.0f |\n", setting, name, ir, mr }
       else printf "| %s | %s | %.0f |\n", setting, name, ir}
      END {if (sim == "yes") printf "| %s | total | %.0f | %.0f |\n", setting, t, tm
           else printf "| %s | total | %.0f |\n", setting, t}'
}

# Directory names avoid '%': callgrind reads it in --callgrind-out-file.
for setting in "off:" "0pct:0" "1pct:0.01" "100pct:1"; do
  name="${setting%%:*}" ratio="${setting#*:}"
  run "$name" "$small" "$ratio"
  run "$name" "$large" "$ratio"
done
if [ "$cache_sim" = yes ]; then
  echo "| setting | process | instructions per operation | I1 misses per operation |"
  echo "|---|---|---:|---:|"
else
  echo "| setting | process | instructions per operation |"
  echo "|---|---|---:|"
fi
for name in off 0pct 1pct 100pct; do per_op "$name"; done
echo
echo "callgrind files: $out"
