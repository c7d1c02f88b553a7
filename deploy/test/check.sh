#!/usr/bin/env bash
# Offline checks of the deployment files (deploy/) and the Helm chart (helm/).
#
#   deploy/test/check.sh
#
# Installs what it needs into .tools/deploy-venv (git-ignored) from PyPI on
# first use: helm-python-sdk (Helm's Go SDK as a library, no helm binary),
# kubernetes-validate (Kubernetes schemas, offline), nats-py and nkeys. The
# nats-server comes from $ORRERY_NATS_SERVER or scripts/ensure-nats.sh.
# Then, with no network:
#
#   1. generates throwaway nkeys with deploy/nats/gen-nkeys.py (role keys,
#      and a fleet with per-target keys: --satellite site-b=local:site-b,...)
#      and throwaway certificates with deploy/nats/gen-certs.sh;
#   2. `nats-server -t` on every NATS configuration in deploy/nats (as
#      shipped, their /etc/orrery/nats/tls/ pointed at the generated
#      certificates, and with the generated per-target users.conf), checks
#      that every one binds monitoring to 127.0.0.1 and requires TLS, and
#      proves a missing key variable is refused;
#   3. starts nats-server with deploy/nats/accounts.conf and proves the
#      subject permissions with real clients (satellite cannot publish
#      orrery.op.x.y, primary can, ...); the same for the generated fleet
#      users.conf, where site-b's per-target key can neither receive nor
#      answer site-c's operations, and for the NATS accounts in
#      helm/orrery/values.yaml; the shipped three-node cluster on loopback,
#      which a rogue nats-server cannot join as a route; and, where a
#      private network namespace can be made (root), the shipped
#      single-server core and leaf node configurations end to end; and the
#      real orrery-satellite (when built) registers, serves, replies and
#      drains under the satellite permissions (every-target and per-target
#      keys) with no violation;
#   4. lints and renders the chart (defaults, ci/values-large.yaml, more
#      value sets, and value sets it must refuse) and validates every
#      rendered manifest against Kubernetes schemas (strict), asserting the
#      secure defaults (issue 43): TLS on for NATS clients, leaf nodes and
#      the API unless explicitly opted out (generated certificates verified
#      with openssl, or cert-manager's), clients mounting ca.crt only, the
#      PostgreSQL store's hashing key from a Secret of its own and nowhere
#      else, satellite and leaf users limited to their targets;
#
#   The shipped users.conf has no every-target satellite or leaf identity
#   (proven: those keys are refused); the checks that use one shared key
#   run on a copy with its commented opt-in enabled. compose.yaml gives each
#   service only the files it needs (static_check.py).
#
#   5. systemd units (systemd-analyze verify where available), compose.yaml
#      (docker compose config where a working docker compose exists) and the
#      Dockerfile's consistency with the workspace.
#
# Fails loudly on any problem; prints what it validated. Its shell helpers
# (tools, fleet keys, private network namespaces) are in deploy/test/lib.sh,
# shared with deploy/test/multihost.sh.
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=deploy/test/lib.sh
. deploy/test/lib.sh
started=$SECONDS

# ---------------------------------------------------------------- tools ----
step "tools"
ensure_tools

work="$(mktemp -d "${TMPDIR:-/tmp}/orrery-deploy-check.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# ----------------------------------------------------------------- keys ----
step "nkeys (deploy/nats/gen-nkeys.py)"
keys="$work/keys"
"$py" deploy/nats/gen-nkeys.py --out "$keys" --k8s-secret orrery-nats-auth >/dev/null
for f in primary.nk satellite.nk leaf.nk sysadmin.nk nkeys.env leaf.env users.conf orrery-nats-auth.secret.yaml; do
  [ -s "$keys/$f" ] || die "gen-nkeys.py did not write $f"
done
[ "$(stat -c %a "$keys/primary.nk")" = 600 ] || die "seed files must be mode 0600"
"$venv/bin/kubernetes-validate" --strict --quiet "$keys/orrery-nats-auth.secret.yaml" \
  || die "the Kubernetes Secret gen-nkeys.py writes is invalid"
say "  ok   seeds (mode 0600), nkeys.env, leaf.env, users.conf and a valid Kubernetes Secret"
fleet="$work/fleet"
# site-b and site-c each serve their own target and a shared one (lab);
# "old" is an identity made with the old syntax (every target).
fleet_config "$fleet" site-b=local:site-b,local:lab site-c=local:site-c,local:lab old
grep -q '"orrery.op.local.site-b", "orrery.op.local.lab"' "$fleet/users.conf" \
  || die "gen-nkeys.py --satellite site-b=local:site-b,local:lab did not limit site-b to its subjects"
if grep -A1 '# satellite site-b' "$fleet/users.conf" | grep -q -e 'orrery.op.>' -e '_INBOX'; then
  die "site-b's per-target permissions still name orrery.op.> or _INBOX"
fi
say "  ok   a fleet with per-target keys (site-b=local:site-b,local:lab; site-c=...) and an every-target one (old)"
if "$py" deploy/nats/gen-nkeys.py --out "$work/bad-keys" --satellite 'x=local:a.b' >/dev/null 2>&1; then
  die "gen-nkeys.py accepted a target with a dot (it would widen the subject)"
fi
say "  ok   gen-nkeys.py refuses a target that is not one subject token"
shipped="$work/shipped"
tls_copy "$shipped"
# The shipped users.conf has no satellite or leaf identity; the end-to-end
# checks below that use one shared key run with its commented opt-in enabled.
every="$work/every-target"
every_target_copy "$every"
if grep -v '^#' deploy/nats/users.conf | grep -q -e 'SATELLITE_PERMISSIONS' -e 'LEAF_PERMISSIONS' -e 'permissions-every-target'; then
  die "deploy/nats/users.conf gives a satellite or leaf every target by default (only as a commented opt-in)"
fi
if grep -q -e '^SATELLITE_PERMISSIONS' -e '^LEAF_PERMISSIONS' deploy/nats/permissions.conf; then
  die "deploy/nats/permissions.conf defines an every-target set (it belongs in permissions-every-target.conf, an opt-in)"
fi
say "  ok   deploy/nats/users.conf: no every-target satellite or leaf identity by default (a commented opt-in)"
for f in ca.crt server.crt route-ca.crt route.crt; do [ -s "$shipped/tls/$f" ] || die "gen-certs.sh did not write $f"; done
[ "$(stat -c %a "$shipped/tls/server.key")" = 600 ] || die "gen-certs.sh: keys must be mode 0600"
openssl verify -CAfile "$shipped/tls/ca.crt" "$shipped/tls/server.crt" >/dev/null || die "server.crt does not verify against ca.crt"
if openssl verify -CAfile "$shipped/tls/ca.crt" "$shipped/tls/route.crt" >/dev/null 2>&1; then
  die "route.crt verifies against the client CA: a client certificate could be a route's"
fi
say "  ok   gen-certs.sh: a CA, server.crt, and a separate route CA whose route.crt the client CA does not accept"

# Environment of the servers: public keys and the leaf's seed.
mapfile -t server_env < <(env_file_args "$keys/nkeys.env" "$keys/leaf.env")

# -------------------------------------------------------- nats-server -t ----
step "NATS configurations (nats-server -t; TLS certificates from gen-certs.sh)"
confs=(deploy/nats/single/nats.conf deploy/nats/cluster/nats-a.conf deploy/nats/cluster/nats-b.conf
       deploy/nats/cluster/nats-c.conf deploy/nats/leaf/leaf.conf)
for conf in "${confs[@]}"; do
  grep -q '^http: 127\.0\.0\.1:8222$' "$conf" || die "$conf: monitoring must bind 127.0.0.1"
  if grep -E '^[[:space:]]*[^#]*0\.0\.0\.0:8222' "$conf"; then die "$conf: monitoring on 0.0.0.0"; fi
  case "$conf" in
    */leaf.conf)
      awk '/remotes:/,/^}/' "$conf" | grep -q 'ca_file: *"/etc/orrery/nats/tls/ca.crt"' \
        || die "$conf: the uplink to the core must verify it (tls ca_file in the remote)" ;;
    *)
      grep -q '^tls {' "$conf" || die "$conf: client TLS must be on"
      awk '/^leafnodes {/,/^}/' "$conf" | grep -q 'cert_file' || die "$conf: leaf node TLS must be on" ;;
  esac
  case "$conf" in
    */cluster/*)
      awk '/^cluster {/,/^}/' "$conf" > "$work/cluster-block"
      grep -q 'verify_and_map: true' "$work/cluster-block" && grep -q 'route-ca.crt' "$work/cluster-block" \
        && grep -q 'user: orrery-route' "$work/cluster-block" \
        || die "$conf: routes must be mutually authenticated (route CA, verify_and_map, user orrery-route)" ;;
  esac
  out="$(env "${server_env[@]}" "$nats_server" -t -c "$shipped/${conf#deploy/nats/}" 2>&1)" || die "$conf: $out"
  out="$(env "${server_env[@]}" "$nats_server" -t -c "$every/${conf#deploy/nats/}" 2>&1)" || die "$conf with the every-target opt-in: $out"
  say "  ok   $conf (monitoring on 127.0.0.1, TLS on), as shipped and with users.conf's every-target opt-in"
  fconf="$fleet/${conf#deploy/nats/}"
  out="$(env ORRERY_LEAF_NKEY_SEED="$(sed -n 's/^ORRERY_LEAF_NKEY_SEED=//p' "$fleet/keys/leaf-site-b.env")" \
    "$nats_server" -t -c "$fconf" 2>&1)" || die "$conf with the fleet users.conf: $out"
  say "  ok   $conf with a generated per-satellite users.conf"
done
limited="$work/limited"
fleet_config "$limited" site-b=local:site-b
out="$("$nats_server" -t -c "$limited/single/nats.conf" 2>&1)" || die "a users.conf with only per-target identities: $out"
say "  ok   single/nats.conf with a users.conf of per-target identities only (no shared set in use)"
if out="$(env -i "$nats_server" -t -c deploy/nats/single/nats.conf 2>&1)"; then
  die "nats-server accepted single/nats.conf without the ORRERY_NKEY_* variables"
fi
case "$out" in *ORRERY_NKEY_*) say "  ok   a missing key variable is refused ($(printf '%s' "$out" | tr -d '\n' | cut -c1-110)...)";;
  *) die "unexpected error without ORRERY_NKEY_*: $out";; esac
[ "$(ls deploy/nats/cluster/*.conf | wc -l)" -eq 3 ] || die "expected exactly three cluster node configurations"

# ---------------------------------------------------------- permissions ----
step "NATS subject permissions (real nats-server, nats-py clients)"
"$py" "$here/nats_permissions.py" no-shared --nats-server "$nats_server" --keys "$keys" \
  --accounts deploy/nats/accounts.conf --refused-key satellite --refused-key leaf \
  || die "the shipped users.conf admits an every-target satellite or leaf key"
"$py" "$here/nats_permissions.py" core --nats-server "$nats_server" --keys "$keys" \
  --accounts "$every/accounts.conf" || die "permission checks of deploy/nats/accounts.conf with the every-target opt-in"
"$py" "$here/nats_permissions.py" core --nats-server "$nats_server" --keys "$fleet/keys" --satellite old \
  --accounts "$fleet/accounts.conf" || die "permission checks with the generated fleet users.conf"

step "per-target satellite keys: site-b cannot receive or answer site-c's operations"
"$py" "$here/nats_permissions.py" targets --nats-server "$nats_server" --keys "$fleet/keys" \
  --accounts "$fleet/accounts.conf" --satellite site-b --own orrery.op.local.site-b \
  --other-satellite site-c --other orrery.op.local.site-c --legacy old || die "per-target permission checks"

step "the shipped three-node cluster on loopback: routes authenticated, a rogue server cannot join"
"$py" "$here/nats_permissions.py" cluster --nats-server "$nats_server" --keys "$keys" --dir "$every" \
  --tls-ca "$every/tls/ca.crt" || die "cluster route checks"

step "the real orrery-satellite under the satellite permissions"
sat_bin="${CARGO_TARGET_DIR:-$root/target}/debug/orrery-satellite"
plugin_bin="${CARGO_TARGET_DIR:-$root/target}/debug/orrery-plugin-local"
if [ -x "$sat_bin" ] && [ -x "$plugin_bin" ]; then
  "$py" "$here/nats_permissions.py" satellite --nats-server "$nats_server" --keys "$keys" \
    --accounts "$every/accounts.conf" --satellite-bin "$sat_bin" --plugin "$plugin_bin" \
    || die "the real satellite under deploy/nats/accounts.conf (every-target opt-in)"
  "$py" "$here/nats_permissions.py" satellite --nats-server "$nats_server" --keys "$fleet/keys" \
    --accounts "$fleet/accounts.conf" --satellite-bin "$sat_bin" --plugin "$plugin_bin" \
    --satellite site-b --target site-b --target lab \
    || die "the real satellite with a per-target key (site-b=local:site-b,local:lab)"
else
  skip "real satellite check: $sat_bin or $plugin_bin not built (scripts/test.sh builds them before this step)"
fi

step "Helm chart (helm-python-sdk render + lint, kubernetes-validate --strict)"
# Per-target values for the chart, as an operator would make them.
"$py" deploy/nats/gen-nkeys.py --out "$work/helm-keys" --satellite satellite=local:lab,local:prod \
  --leaf leaf=local:edge --helm-values "$work/per-target.values.yaml" >/dev/null || die "gen-nkeys.py --helm-values"
# The chart's NATS reads the public keys from the Secret; here from the .pub files.
for r in primary satellite leaf sysadmin; do
  printf 'ORRERY_NKEY_%s=%s\n' "${r^^}" "$(cat "$work/helm-keys/$r.pub")"
done > "$work/helm-keys/nkeys.env"
"$py" "$here/chart_check.py" --chart helm/orrery --out "$work/rendered" \
  --accounts-out "$work/chart-accounts.conf" --extra-values "$work/per-target.values.yaml" \
  --extra-accounts-out "$work/chart-per-target-accounts.conf" || die "Helm chart checks"
say "  rendered manifests were written to $work/rendered (removed on exit)"

step "NATS permissions of the chart's accounts (helm/orrery/values.yaml nats.config.merge)"
# The chart's satellite user serves the default satellite.plugins (local) on
# the default satellite.targets (default) only: no other target, no wildcard.
"$py" "$here/nats_permissions.py" core --nats-server "$nats_server" --keys "$keys" \
  --accounts "$work/chart-accounts.conf" --op orrery.op.local.default --watch orrery.op.local.default \
  --refused 'orrery.op.local.*' --refused orrery.op.local.other --refused orrery.op.testbed.default \
  --refused 'orrery.op.*.default' --refused 'orrery.describe.>' \
  || die "permission checks of the chart's NATS accounts"
# ... and with the values gen-nkeys.py --helm-values wrote (satellite=local:lab,local:prod).
"$py" "$here/nats_permissions.py" core --nats-server "$nats_server" --keys "$work/helm-keys" \
  --accounts "$work/chart-per-target-accounts.conf" --op orrery.op.local.lab --watch orrery.op.local.lab --serve orrery.op.local.prod \
  --refused 'orrery.op.local.*' --refused orrery.op.local.edge --refused orrery.op.testbed.lab \
  || die "permission checks of the chart with gen-nkeys.py --helm-values"

step "core + leaf node, as shipped (private network namespace)"
if why="$(why_no_private_net)"; then
  skip "leaf node check: $why"
else
  printf '127.0.0.1 localhost\n127.0.0.1 nats-a nats-b nats-c\n' > "$work/hosts"
  in_private_net "" "$work/hosts" tmpfs \
    "$py" "$here/nats_permissions.py" leaf --nats-server "$nats_server" --keys "$keys" \
    --core "$every/single/nats.conf" --leaf "$every/leaf/leaf.conf" --tls-ca "$every/tls/ca.crt" \
    || die "core + leaf node checks"
fi

# ----------------------------------------------------- the other files ----
step "systemd units, compose.yaml, Dockerfile"
"$py" "$here/static_check.py" --root "$root" || die "static checks"
if command -v systemd-analyze >/dev/null; then
  units="$work/units"
  mkdir -p "$units"
  cp deploy/systemd/orrery-primary.service deploy/systemd/orrery-nats.service "$units/"
  cp "deploy/systemd/orrery-satellite@.service" "$units/orrery-satellite@check.service"
  # The binaries are not installed here: that one complaint is expected.
  out="$(cd "$units" && systemd-analyze verify ./orrery-primary.service ./orrery-nats.service \
    ./orrery-satellite@check.service 2>&1 | grep -v -E 'Command /usr/local/bin/(orrery|orrery-satellite|nats-server) is not executable' || true)"
  [ -z "$out" ] || die "systemd-analyze verify: $out"
  say "  ok   systemd-analyze verify: orrery-primary.service, orrery-satellite@.service, orrery-nats.service"
else
  skip "systemd-analyze verify: systemd-analyze not installed"
fi
if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
  docker compose -f deploy/compose.yaml config --quiet || die "docker compose config rejected deploy/compose.yaml"
  say "  ok   docker compose config: deploy/compose.yaml"
else
  skip "docker compose config: no working docker compose on this machine (compose.yaml was parsed and checked above)"
fi

say ""
say "deploy/test/check.sh: all checks passed in $((SECONDS - started)) s${skips:+ (${#skips[@]} skipped)}"
for s in "${skips[@]}"; do say "  skipped: $s"; done
