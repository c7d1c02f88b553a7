#!/usr/bin/env bash
# Prints the path of a moto_server (moto[server] from PyPI, Apache-2.0: an
# AWS emulator for the AWS plugin's tests), installing one into a venv in
# .tools/moto (git-ignored) when none is found.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.tools/moto"
local_bin="$venv/bin/moto_server"

works() {
  [ -n "$1" ] && [ -x "$1" ] && "$1" --help >/dev/null 2>&1
}

# Only an explicit ORRERY_MOTO_SERVER or the pinned venv: a moto found on
# PATH may be older (with 5.2.1 a bucket's create fails on a 200 answer the
# SDK cannot read), and the tests must see the emulator they were written for.
for candidate in "${ORRERY_MOTO_SERVER:-}" "$local_bin"; do
  if works "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

echo "installing moto[server] from PyPI into .tools/moto" >&2
rm -rf "$venv"
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'moto[server]>=5.2.6,<6' >&2
works "$local_bin" || { echo "installed moto_server does not run" >&2; exit 1; }
echo "$local_bin"
