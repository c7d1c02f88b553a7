#!/usr/bin/env bash
# The multi-host test: the primary and a NATS core on host A, a leaf node and
# a satellite on each of hosts B and C, three network namespaces joined by
# veth links (A<->B, A<->C); host B is cut off in the middle of an apply.
#
#   deploy/test/multihost.sh          (root; run by scripts/test.sh)
#
# Needs the built binaries (orrery, orrery-satellite, orrery-plugin-testbed
# in ${CARGO_TARGET_DIR:-target}/debug), nats-server and the deploy venv
# (deploy/test/lib.sh finds or installs both). Without root or `ip netns` it
# prints SKIP and exits 0.
#
# Every host runs the shipped configuration: A deploy/nats/single/nats.conf
# (JetStream's /var/lib redirected to a temporary directory), B and C
# deploy/nats/leaf/leaf.conf with their own leaf identity, in a copy of
# deploy/nats whose users.conf lists per-target keys from `gen-nkeys.py
# --satellite site-b=testbed:lab,testbed:site-b --leaf site-b=... (and the
# same for site-c)` and whose TLS paths point at certificates from
# gen-certs.sh (clients of A and the leaf uplinks use TLS). Each satellite
# uses its own nkey and serves the shared target lab and its own site's
# (--target lab --target site-X), the primary primary.nk (--nats-nkey and
# --tls-ca, and the config file for the second apply).
#
# What it proves, each step failing the test if it does not hold:
#   1. an apply on A of testbed things that take a while each is served by
#      the satellites on both B and C;
#   2. with B's link down mid-apply, the operations B had in flight are
#      resolved (their answers never come: the primary's request timeout)
#      and sent again, C serves them, the apply completes with every
#      resource created, and B serves nothing while it is cut off;
#   3. with the link back, B's leaf reconnects, its satellite is seen again
#      from A, and it takes work in a second apply;
#   4. site-b's key cannot take site-c's work: a client on B with site-b's
#      key, at B's leaf and directly at the core, is refused every
#      subscription that would deliver orrery.op.testbed.site-c (the subject
#      itself, in and out of the queue group, testbed.*, orrery.op.>,
#      _INBOX.>) and a forged reply; a rogue leaf server on B with B's leaf
#      key and no local policy receives nothing of site-c's either. During
#      an apply to target site-c none of them receives a request (each
#      would answer it with a forged result), site-c serves every operation
#      and the primary records all of them as succeeded with no retry;
#   5. a client with satellite credentials cannot publish an operation
#      request (orrery.op.testbed.lab), neither at B's leaf nor at the core:
#      the client gets a permissions violation and the server logs it.
# The satellites log every request they relay with their id (debug level of
# orrery_satellite::relay); the counts per phase come from those logs.
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=deploy/test/lib.sh
. deploy/test/lib.sh
started=$SECONDS

step "prerequisites"
if why="$(why_no_private_net netns)"; then
  say "  SKIP multihost.sh: $why"
  exit 0
fi
bin="${CARGO_TARGET_DIR:-$root/target}/debug"
for b in orrery orrery-satellite orrery-plugin-testbed; do
  [ -x "$bin/$b" ] || die "$bin/$b is not built (cargo build --bins -p orrery-primary -p orrery-satellite -p orrery-plugin-testbed)"
done
ensure_tools

# The first apply: THINGS creates of DELAY_MS each, CONCURRENCY at a time.
# Long enough that B is busy when it is cut off; the primary's request
# timeout (60 s) dominates the run time.
things=120 delay_ms=1000 concurrency=16
later_things=40
site_c_things=12

work="$(mktemp -d "${TMPDIR:-/tmp}/orrery-multihost.XXXXXX")"
ns="orrery-mh-$$"
pids=()

names=()

cleanup() {
  local rc=$? i n h pid
  set +e
  # Last started first: satellites drain while their leaf is still up.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[$i]}
    kill -TERM "$pid" 2>/dev/null
    for n in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      say "  (${names[$i]} did not stop within 5 s of SIGTERM: killed)"
      kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
  done
  for h in a b c; do
    # Whatever is left in our namespaces (plugin processes) is ours too.
    for pid in $(ip netns pids "$ns-$h" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns-$h" 2>/dev/null
  done
  if [ "$rc" -ne 0 ]; then
    for f in "$work"/*.log; do
      [ -f "$f" ] || continue
      printf '\n--- %s (tail)\n' "$(basename "$f")"
      tail -n "${ORRERY_MULTIHOST_LOG_LINES:-25}" "$f"
    done
  fi
  if [ -n "${ORRERY_MULTIHOST_KEEP:-}" ]; then
    say "  kept $work (ORRERY_MULTIHOST_KEEP)"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- hosts ----
step "three hosts: network namespaces $ns-{a,b,c}, veth links A<->B, A<->C"
for h in a b c; do ip netns add "$ns-$h"; done
ip link add veth-b netns "$ns-a" type veth peer name veth-a netns "$ns-b"
ip link add veth-c netns "$ns-a" type veth peer name veth-a netns "$ns-c"
ip -n "$ns-a" addr add 10.231.1.1/24 dev veth-b
ip -n "$ns-b" addr add 10.231.1.2/24 dev veth-a
ip -n "$ns-a" addr add 10.231.2.1/24 dev veth-c
ip -n "$ns-c" addr add 10.231.2.2/24 dev veth-a
ip -n "$ns-a" link set veth-b up
ip -n "$ns-a" link set veth-c up
ip -n "$ns-b" link set veth-a up
ip -n "$ns-c" link set veth-a up
# leaf.conf dials nats-a/b/c: on B and C they all name A's address.
printf '127.0.0.1 localhost\n' > "$work/hosts-a"
printf '127.0.0.1 localhost\n10.231.1.1 nats-a nats-b nats-c\n' > "$work/hosts-b"
printf '127.0.0.1 localhost\n10.231.2.1 nats-a nats-b nats-c\n' > "$work/hosts-c"
mkdir "$work/a-var-lib"
say "  A 10.231.1.1 + 10.231.2.1, B 10.231.1.2, C 10.231.2.2"

# on HOST CMD...: runs CMD on host a, b or c (foreground).
on() {
  local h=$1 varlib=""
  shift
  [ "$h" = a ] && varlib="$work/a-var-lib"
  (cd "$work" && in_private_net "$ns-$h" "$work/hosts-$h" "$varlib" "$@")
}
# start NAME HOST CMD...: runs CMD on HOST in the background, output in NAME.log.
start() {
  local name=$1 h=$2 varlib=""
  shift 2
  [ "$h" = a ] && varlib="$work/a-var-lib"
  private_net_cmd "$ns-$h" "$work/hosts-$h" "$varlib"
  (cd "$work" && exec "${private_net[@]}" "$@") >"$work/$name.log" 2>&1 &
  pids+=("$!")
  names+=("$name")
}
# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds, or fails the test.
wait_for() {
  local what=$1 limit=$2 deadline=$((SECONDS + $2))
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || die "no $what within $limit s"
    sleep 0.2
  done
}
# count FILE TEXT: lines of FILE containing TEXT.
count() {
  local n
  n=$(grep -c -F -- "$2" "$1" 2>/dev/null) || true
  printf '%s\n' "${n:-0}"
}
served() { count "$work/sat-$1.log" "relaying to the plugin"; }
# since T: seconds (one decimal) from $EPOCHREALTIME value T to now.
since() { awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $1 }"; }
at_least() { [ "$(count "$1" "$2")" -ge "$3" ]; }

# ----------------------------------------------------------------- NATS ----
step "NATS: core on A (single/nats.conf), leaf nodes on B and C (leaf/leaf.conf)"
conf="$work/nats"
fleet_config "$conf" site-b=testbed:lab,testbed:site-b site-c=testbed:lab,testbed:site-c
keys="$conf/keys"
ca="$conf/tls/ca.crt"
start nats-a a "$nats_server" -c "$conf/single/nats.conf"
wait_for "core server on A" 15 at_least "$work/nats-a.log" "Server is ready" 1
for h in b c; do
  mapfile -t leaf_env < <(env_file_args "$keys/leaf-site-$h.env")
  start "leaf-$h" "$h" env "${leaf_env[@]}" "$nats_server" -c "$conf/leaf/leaf.conf"
done
wait_for "leaf connections from B and C on A" 20 at_least "$work/nats-a.log" "Leafnode connection created" 2
say "  ok   A: JetStream in $work/a-var-lib; leaf nodes of B and C connected to A"

# ----------------------------------------------------------- satellites ----
step "satellites site-b and site-c (own nkeys), each on its local leaf"
for h in b c; do
  start "sat-$h" "$h" env RUST_LOG=info,orrery_satellite::relay=debug \
    "$bin/orrery-satellite" --nats-url nats://127.0.0.1:4222 --nats-nkey "$keys/site-$h.nk" \
    --target lab --target "site-$h" --id "site-$h" --plugin "$bin/orrery-plugin-testbed" --drain-grace-secs 2 \
    --receipts
done
# fleet_has ID: `orrery satellites` on A (the primary's nkey, from the
# environment) lists satellite ID.
fleet_has() {
  on a env ORRERY_NATS_URL=nats://127.0.0.1:4222 ORRERY_NATS_NKEY="$keys/primary.nk" ORRERY_TLS_CA="$ca" \
    "$bin/orrery" satellites --output json 2>/dev/null | grep -q "\"satellite_id\":\"$1\""
}
wait_for "satellite site-b seen from A" 30 fleet_has site-b
wait_for "satellite site-c seen from A" 30 fleet_has site-c
say "  ok   orrery satellites on A lists site-b and site-c (through their leaf nodes)"

# ---------------------------------------------------------------- stacks ----
# polls: 0 because the testbed keeps things in its process's memory: a
# status poll must not depend on which satellite the create went to.
write_stack() { # FILE STACK COUNT DELAY_MS [TARGET]
  local target=${5:-lab}
  {
    printf 'stack: %s\ntargets:\n  - name: %s\n    plugin: testbed\n' "$2" "$target"
    printf '    config: { polls: 0, delay_ms: %s }\nresources:\n' "$4"
    for i in $(seq -w 1 "$3"); do
      printf '  - label: thing-%s\n    type: Testbed::Async::Thing\n    target: %s\n    properties: { name: %s-%s }\n' \
        "$i" "$target" "$2" "$i"
    done
  } > "$1"
}
write_stack "$work/stack1.yaml" multihost "$things" "$delay_ms"
write_stack "$work/stack2.yaml" multihost-after "$later_things" 100
write_stack "$work/stack3.yaml" multihost-site-c "$site_c_things" 100 site-c

# ------------------------------------------------------- apply, then cut ----
step "apply on A: $things testbed things, ${delay_ms} ms each, $concurrency at a time; cut B off mid-apply"
apply_started=$EPOCHREALTIME
start apply1 a "$bin/orrery" apply "$work/stack1.yaml" --yes --concurrency "$concurrency" \
  --data-dir "$work/state" --nats-url nats://127.0.0.1:4222 --nats-nkey "$keys/primary.nk" --tls-ca "$ca"
apply_pid=${pids[-1]}
# A satellite never holds more than $concurrency requests at once: past
# that many, it has answered some.
both_served() { [ "$(served b)" -ge $((concurrency + 4)) ] && [ "$(served c)" -ge $((concurrency + 4)) ]; }
wait_for "operations answered by both satellites" 60 both_served
kill -0 "$apply_pid" 2>/dev/null || die "the apply ended before B could be cut off (raise things=)"
ip -n "$ns-b" link set veth-a down
cut_at=$EPOCHREALTIME
apply_ran_before_cut=$(since "$apply_started")
c_before=$(served c)
say "  cut: ip link set veth-a down on B, $apply_ran_before_cut s into the apply (site-b $(served b), site-c $c_before served so far)"
# Nothing can reach B once its link is down; its count is taken when its
# leaf has given up the uplink, so a request that arrived just before the
# cut and is logged a moment later still counts as before the cut.
wait_for "B's leaf noticing the cut" 30 at_least "$work/leaf-b.log" "Leafnode connection closed" 1
b_before=$(served b)
wait_for "A dropping B's leaf connection" 30 grep -q "10.231.1.2:.*Leafnode connection closed" "$work/nats-a.log"
say "  ok   B's leaf and A dropped the link $(since "$cut_at") s after the cut (ping_interval 5s, ping_max 2)"
apply_done() { ! kill -0 "$apply_pid" 2>/dev/null; }
wait_for "end of the apply while B is cut off" 150 apply_done
apply_ran_after_cut=$(since "$cut_at")
rc=0
wait "$apply_pid" || rc=$?
[ "$rc" -eq 0 ] || die "the apply failed (exit $rc) while B was cut off"
summary=$(grep '^Done in' "$work/apply1.log") || die "the apply printed no summary"
case "$summary" in
  *": $things succeeded, 0 failed"*) ;;
  *) die "the apply did not create all $things things: $summary" ;;
esac
b_cut=$(( $(served b) - b_before ))
c_cut=$(( $(served c) - c_before ))
[ "$b_cut" -eq 0 ] || die "site-b served $b_cut operations while cut off"
# With receipts, what B took before the cut fails once B misses its pings
# (2.5 s) and what was sent towards B after it goes again after 1.2 s: the
# apply is not held for the 60 s request timeout (it was, before receipts).
awk -v t="$apply_ran_after_cut" 'BEGIN { exit !(t < 40) }' \
  || die "the apply ended $apply_ran_after_cut s after the cut: requests at B waited for their timeout"
[ "$c_cut" -gt 0 ] || die "site-c served nothing while B was cut off"
# Requests keep their request id when sent again: those B took before the
# cut and C served after it are the re-sent ones.
ids() { sed -n 's/.*operation=create.* request_id=\([^ ]*\).*/\1/p' "$work/sat-$1.log" | sort -u; }
resent=$(comm -12 <(ids b) <(ids c) | wc -l)
[ "$resent" -gt 0 ] || die "no create B had in flight was sent again to C"
say "  ok   apply: $summary"
retries=$(sed -n 's/.* \([0-9]*\) retries\..*/\1/p' <<<"$summary")
say "  ok   $resent creates in flight on B at the cut timed out unanswered and were re-sent to C"
say "       ($retries retries in all: also those sent towards B after the cut, before A noticed)"
say "  ok   during the cut site-b served 0 and site-c $c_cut operations"

# ------------------------------------------------------------- restore ----
step "restore B's link: its leaf reconnects, site-b takes work again"
b_restore=$(served b)
c_restore=$(served c)
ip -n "$ns-b" link set veth-a up
restored_at=$EPOCHREALTIME
wait_for "B's leaf reconnecting to A" 30 at_least "$work/leaf-b.log" "Leafnode connection created" 2
wait_for "site-b seen from A again" 30 fleet_has site-b
say "  ok   B rejoined $(since "$restored_at") s after its link came back"
printf 'nats_url = "nats://127.0.0.1:4222"\nnats_nkey = "%s"\ntls_ca = "%s"\ndata_dir = "%s"\n' \
  "$keys/primary.nk" "$ca" "$work/state" > "$work/orrery.toml"
on a "$bin/orrery" apply "$work/stack2.yaml" --yes --concurrency "$concurrency" \
  --config "$work/orrery.toml" > "$work/apply2.log" 2>&1 || die "the second apply failed"
summary2=$(grep '^Done in' "$work/apply2.log") || die "the second apply printed no summary"
case "$summary2" in
  *": $later_things succeeded, 0 failed"*) ;;
  *) die "the second apply did not create all $later_things things: $summary2" ;;
esac
b_after=$(( $(served b) - b_restore ))
c_after=$(( $(served c) - c_restore ))
[ "$b_after" -gt 0 ] || die "site-b served nothing after it rejoined"
[ "$c_after" -gt 0 ] || die "site-c served nothing in the second apply"
say "  ok   second apply (NATS settings from orrery.toml): $summary2"
say "  ok   after the restore site-b served $b_after and site-c $c_after operations"

# ------------------------------------------------- site-b vs site-c's work ----
step "site-b's key cannot receive or answer site-c's operations (an apply to target site-c)"
cat > "$work/steal.py" <<'PY'
"""Try to take SUBJECT's operations as CRED (an nkey seed file, or user:password):
subscribe to it (in and out of its queue group) and to every wider subject,
answer whatever arrives with a forged result, and forge a reply to an inbox.
Prints "ready" once the server has answered every attempt (or after 5 s),
runs until STOPFILE exists (120 s at most), then prints a JSON report. The
canary: it also listens (without answering) on $SRV.*.orrery-satellite,
which its key may receive; `orrery satellites` run after the apply arriving
shows it was connected and receiving all along. (It used to be the apply's
orrery.describe.<plugin>: describe is per target now, and SUBJECT's
target's describe subject is one of the attempts.)"""
import asyncio
import json
import logging
import os
import ssl
import sys
import time

import nats

FORGED = b"forged result from site-b"


async def main() -> None:
    url, cred, subject, stopfile, ca = sys.argv[1:6]
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    errors: list[str] = []
    received: list[str] = []
    canary: list[str] = []

    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    opts = dict(error_cb=on_error, allow_reconnect=False, connect_timeout=5, name="thief")
    if url.startswith("tls://"):
        opts["tls"] = ssl.create_default_context(cafile=ca)
    if os.path.exists(cred):
        opts["nkeys_seed"] = cred
    else:
        opts["user"], opts["password"] = cred.split(":", 1)
    nc = await nats.connect(url, **opts)

    async def take(msg) -> None:
        if msg.subject == "_INBOX.forged" and msg.data == FORGED:
            return  # its own forgery, looped back by a server without a policy
        received.append(msg.subject)
        if msg.reply:
            await nc.publish(msg.reply, FORGED)

    async def listen(msg) -> None:
        canary.append(msg.subject)

    plugin = subject.split(".")[2]
    await nc.subscribe("$SRV.*.orrery-satellite", cb=listen)
    attempts = [(subject, f"orrery-{plugin}"), (subject, ""), (subject.rsplit(".", 1)[0] + ".*", ""),
                ("orrery.op.>", ""), ("_INBOX.>", ""),
                ("orrery.describe." + subject.split(".", 2)[2], ""), (f"orrery.describe.{plugin}", "")]
    for s, q in attempts:
        await nc.subscribe(s, queue=q, cb=take)
    await nc.publish("_INBOX.forged", FORGED)
    # nats-py's flush() can overtake buffered commands: flush twice.
    await nc.flush(5)
    await asyncio.sleep(0.05)
    await nc.flush(5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(errors) < len(attempts) + 1:
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(stopfile) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await nc.flush(5)
    await nc.close()
    print(json.dumps({"attempts": len(attempts) + 1, "refused": errors, "received": received, "canary": canary}),
          flush=True)


asyncio.run(main())
PY
# A rogue leaf server on B: B's leaf key, no policy of its own (anyone may
# connect and subscribe to anything locally). What reaches it is decided by
# the core, by the permissions of leaf-site-b alone.
mapfile -t leaf_env < <(env_file_args "$keys/leaf-site-b.env")
cat > "$work/rogue-leaf.conf" <<CONF
server_name: rogue-leaf-b
listen: 127.0.0.1:4333
accounts: { ORRERY: { users: [ { user: thief, password: thief } ] } }
leafnodes {
  reconnect: "1s"
  remotes: [ { urls: ["nats-leaf://nats-a:7422"], account: ORRERY, nkey: \$ORRERY_LEAF_NKEY_SEED,
               tls: { ca_file: "$ca", timeout: 2 } } ]
}
CONF
leaves_before=$(count "$work/nats-a.log" "Leafnode connection created")
start rogue-leaf-b b env "${leaf_env[@]}" "$nats_server" -c "$work/rogue-leaf.conf"
wait_for "the rogue leaf on B connecting to A" 20 at_least "$work/nats-a.log" "Leafnode connection created" $((leaves_before + 1))
stop_file="$work/steal.stop"
thieves=(thief-leaf-b thief-core-b thief-rogue-leaf-b)
start thief-leaf-b b "$py" "$work/steal.py" nats://127.0.0.1:4222 "$keys/site-b.nk" orrery.op.testbed.site-c "$stop_file" "$ca"
start thief-core-b b "$py" "$work/steal.py" tls://nats-a:4222 "$keys/site-b.nk" orrery.op.testbed.site-c "$stop_file" "$ca"
start thief-rogue-leaf-b b "$py" "$work/steal.py" nats://127.0.0.1:4333 thief:thief orrery.op.testbed.site-c "$stop_file" "$ca"
for t in "${thieves[@]}"; do wait_for "$t ready" 20 at_least "$work/$t.log" "ready" 1; done
b_site_c=$(served b)
c_site_c=$(served c)
on a "$bin/orrery" apply "$work/stack3.yaml" --yes --concurrency "$concurrency" \
  --config "$work/orrery.toml" > "$work/apply3.log" 2>&1 || die "the apply to target site-c failed"
fleet_has site-c || die "orrery satellites on A no longer lists site-c"  # the thieves' canary
touch "$stop_file"
for t in "${thieves[@]}"; do wait_for "$t's report" 15 grep -q '^{' "$work/$t.log"; done
summary3=$(grep '^Done in' "$work/apply3.log") || die "the apply to site-c printed no summary"
case "$summary3" in
  *": $site_c_things succeeded, 0 failed"*" 0 retries."*) ;;
  *) die "the apply to site-c did not record $site_c_things clean successes (a forged or lost answer?): $summary3" ;;
esac
b_c=$(( $(served b) - b_site_c ))
c_c=$(( $(served c) - c_site_c ))
[ "$b_c" -eq 0 ] || die "site-b's satellite served $b_c operations of target site-c"
[ "$c_c" -ge "$site_c_things" ] || die "site-c served $c_c of the $site_c_things operations of target site-c"
# report LOG [refused]: the thief's report says it received nothing (and,
# with "refused", that every one of its attempts was refused).
report() {
  "$py" - "$@" <<'PY'
import json, sys
report = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
if len(sys.argv) > 2:
    refused = [e for e in report["refused"] if "permissions violation" in e.lower()]
    assert len(refused) == report["attempts"], f"{len(refused)} of {report['attempts']} attempts refused: {report['refused']}"
assert not report["received"], f"received {report['received']}"
assert report["canary"], "never received orrery satellites' request: not connected or interest never reached the core"
PY
}
for t in thief-leaf-b thief-core-b; do
  report "$work/$t.log" refused || die "$t: site-b's key was not refused everything (see $t.log)"
done
report "$work/thief-rogue-leaf-b.log" \
  || die "the rogue leaf with B's leaf key received site-c's operations (see thief-rogue-leaf-b.log)"
say "  ok   site-b's key at B's leaf and at the core: all 8 attempts refused (7 subscriptions, among them"
say "       orrery.describe.testbed.site-c and orrery.describe.testbed, 1 forged reply), nothing of site-c's"
say "       received (orrery satellites' \$SRV request, which site-b may see, was)"
say "  ok   a rogue leaf server with B's leaf key and no local policy received none of site-c's requests or describes"
say "  ok   apply to site-c: $summary3"
say "  ok   site-c served $c_c operations of target site-c, site-b 0; no forged answer was recorded"

# ---------------------------------------------------------- permissions ----
step "a client with satellite credentials cannot publish an operation request"
cat > "$work/forge.py" <<'EOF'
"""Publish to SUBJECT as the identity in SEED; print the server's -ERR lines."""
import asyncio
import logging
import ssl
import sys
import time

import nats


async def main() -> None:
    url, seed, subject, ca = sys.argv[1:5]
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # "returning true from eof_received()" on TLS closes
    errors: list[str] = []

    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    tls = ssl.create_default_context(cafile=ca) if url.startswith("tls://") else None
    nc = await nats.connect(url, nkeys_seed=seed, error_cb=on_error, allow_reconnect=False,
                            connect_timeout=5, name="forger", tls=tls)
    await nc.publish(subject, b"forged operation request")
    # nats-py's flush() can overtake buffered commands: flush twice.
    await nc.flush(5)
    await asyncio.sleep(0.05)
    await nc.flush(5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any("permissions violation" in e.lower() for e in errors):
        await asyncio.sleep(0.05)
    await nc.close()
    print("\n".join(errors))


asyncio.run(main())
EOF
subject=orrery.op.testbed.lab
forge() { # HOST SEED SERVER_LOG WHERE
  local out url=nats://127.0.0.1:4222
  [ "$1" = a ] && url=tls://127.0.0.1:4222   # the core requires TLS
  out=$(on "$1" "$py" "$work/forge.py" "$url" "$2" "$subject" "$ca") || die "forge.py failed on $1: $out"
  case "$out" in
    *"ermissions violation for publish to \"$subject\""*) ;;
    *) die "$4 accepted an operation request from $(basename "$2" .nk) (client saw: ${out:-no error})" ;;
  esac
  wait_for "a Publish Violation in $(basename "$3")" 10 grep -q "Publish Violation.*$subject" "$3"
  say "  ok   $4 refused $(basename "$2" .nk): client got \"$out\"; the server logged a Publish Violation"
}
forge b "$keys/site-b.nk" "$work/leaf-b.log" "B's leaf"
forge a "$keys/site-c.nk" "$work/nats-a.log" "the core on A"
if grep -q "undecodable" "$work/sat-b.log" "$work/sat-c.log"; then
  die "a forged request reached a satellite"
fi

# --------------------------------------------------------------- summary ----
step "operations served per satellite"
printf '  %-34s %8s %8s\n' "" site-b site-c
printf '  %-34s %8s %8s\n' "before the cut (apply 1)" "$b_before" "$c_before"
printf '  %-34s %8s %8s\n' "during the cut (apply 1 finishes)" "$b_cut" "$c_cut"
printf '  %-34s %8s %8s\n' "after the restore (apply 2)" "$b_after" "$c_after"
printf '  %-34s %8s %8s\n' "apply 3 (target site-c)" "$b_c" "$c_c"
say "  (site-b's first count is taken once its leaf had dropped the link; apply 1 ran"
say "  $apply_ran_before_cut s before the cut and $apply_ran_after_cut s after it; $resent creates were re-sent from B to C)"
say ""
say "deploy/test/multihost.sh: passed in $((SECONDS - started)) s"
