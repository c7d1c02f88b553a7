#!/usr/bin/env bash
# Builds orrery-satellite's bench NAME (and the release testbed plugin it
# drives) and prints the bench executable's path, for the callgrind scripts.
#
#   scripts/bench-binary.sh NAME
set -euo pipefail
cd "$(dirname "$0")/.."
name="$1"
cargo build --release --quiet -p orrery-plugin-testbed --bin orrery-plugin-testbed
cargo bench -p orrery-satellite --bench "$name" --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$name"
