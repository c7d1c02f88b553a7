#!/usr/bin/env bash
# Applies the example to the throwaway server of scripts/with-postgres.sh:
#
#   scripts/with-postgres.sh examples/postgres/try.sh
#
# The stack's target is pointed at that server (its port, its superuser,
# TLS checked against its CA); state goes to $ORRERY_DATA_DIR, else a
# temporary directory. The server is removed when this ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${ORRERY_TEST_DATABASE_URL:?run me as: scripts/with-postgres.sh examples/postgres/try.sh}"
rest=${ORRERY_TEST_DATABASE_URL#postgres://}
user=${rest%%@*}
hostport=${rest#*@}
hostport=${hostport%%/*}
port=${hostport##*:}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed -e "s/port: 5432/port: $port/" -e "s/user: postgres/user: $user/" \
    -e "s|sslmode: prefer|sslmode: verify-full\n      ca_file: \"$ORRERY_TEST_DATABASE_CA\"|" \
    examples/postgres/stack.yaml >"$dir/stack.yaml"
export ORRERY_DATA_DIR="${ORRERY_DATA_DIR:-$dir/state}"
orrery=target/debug/orrery
[ -x "$orrery" ] || { echo "build first: cargo build --workspace --bins" >&2; exit 1; }
"$orrery" apply "$dir/stack.yaml" --yes
"$orrery" plan "$dir/stack.yaml"
"$orrery" inventory --stack pg-example
