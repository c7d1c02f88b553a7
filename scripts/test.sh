#!/usr/bin/env bash
# The one test command: formatting, lints, every test, and smoke runs of the
# benchmarks and the conformance command. CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Incremental caches only help edit-compile loops; here they would double the
# target directory on a disk CI has little of.
export CARGO_INCREMENTAL=0

# Each step says how much disk is left, so a full disk is found at once.
step() { printf '\n==> %s   [%s free]\n' "$*" "$(df -h --output=avail . | tail -1 | tr -d ' ')"; }

step "nats-server (>= 2.10) for the tests that need one"
ORRERY_NATS_SERVER="$(./scripts/ensure-nats.sh)"
export ORRERY_NATS_SERVER
"$ORRERY_NATS_SERVER" --version

step "moto_server (AWS emulator, moto[server] from PyPI) for the AWS plugin's tests"
ORRERY_MOTO_SERVER="$(./scripts/ensure-moto.sh)"
export ORRERY_MOTO_SERVER
echo "$ORRERY_MOTO_SERVER"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "plugin-sdk as a plugin author gets it (default features: no host side, conformance or OTLP)"
cargo clippy -p orrery-plugin-sdk --lib --locked -- -D warnings

step "build binaries"
cargo build --workspace --bins --locked

step "deploy/ and helm/: NATS configs and permissions, chart render/lint/validate (offline)"
./deploy/test/check.sh

step "multi-host: three network namespaces, leaf nodes, a satellite's host cut off mid-apply (root; SKIP otherwise)"
./deploy/test/multihost.sh

step "the dashboard's browser test: Debian's chromium and playwright-core (SKIP when they cannot be installed)"
./tests/browser/install.sh

# Every test runs with a throwaway PostgreSQL (ORRERY_TEST_DATABASE_URL):
# the store conformance suite's PostgreSQL half fails without it.
step "cargo test (with a throwaway PostgreSQL: scripts/with-postgres.sh)"
./scripts/with-postgres.sh cargo test --workspace --locked

step "conformance command against the built local plugin"
target/debug/orrery plugin test target/debug/orrery-plugin-local --fixtures plugins/local/conformance

step "benchmark smoke run (figures in BENCHMARKS.md come from full runs)"
ORRERY_BENCH_QUICK=1 cargo bench --locked -p orrery-schema --bench codec

step "all tests passed"
