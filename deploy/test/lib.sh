# Shell shared by deploy/test/check.sh and deploy/test/multihost.sh. Source
# it from the repository root:  . deploy/test/lib.sh
#
# Sets `root` and `here` and defines:
#   say, step, die, skip        output (die exits 1; skip records a SKIP line)
#   ensure_tools                sets nats_server (>= 2.10) and py/venv (the
#                               pinned packages in .tools/deploy-venv);
#                               checks openssl is there
#   fleet_config DIR NAME[=PLUGIN:TARGET,...]...  a copy of deploy/nats in
#                               DIR whose users.conf lists generated
#                               per-satellite and per-leaf keys (gen-nkeys.py
#                               --satellite SPEC --leaf SPEC for each; a
#                               SPEC with targets limits both to them; keys
#                               in DIR/keys, DIR/keys/NAME.nk and
#                               DIR/keys/leaf-NAME.env), and TLS certificates
#                               from gen-certs.sh in DIR/tls, which every
#                               server configuration in DIR points at (the
#                               one change to the shipped files: their
#                               /etc/orrery/nats/tls/ becomes DIR/tls/)
#   tls_copy DIR                the same copy of deploy/nats with certificates,
#                               its users.conf unchanged (the shipped one)
#   every_target_copy DIR       tls_copy with users.conf's commented opt-in
#                               enabled (a shared every-target satellite and
#                               leaf identity, from ORRERY_NKEY_*)
#   env_file_args FILE...       prints the KEY=VALUE lines of env files
#                               (no comments), for `env`
#   why_no_private_net [netns]  prints why private network namespaces (with
#                               "netns": named ones and veth links, `ip
#                               netns`) cannot be made here; prints nothing
#                               and fails if they can:
#                                 if why="$(why_no_private_net)"; then skip ...
#   in_private_net NETNS HOSTS VARLIB CMD...  runs CMD in network namespace
#                               NETNS ("" = a new one of its own) with HOSTS
#                               over /etc/hosts and VARLIB over /var/lib (a
#                               directory, "tmpfs", or "" to leave it), in a
#                               private mount namespace; lo is brought up
#   private_net_cmd NETNS HOSTS VARLIB  sets the array private_net to that
#                               command's prefix: "${private_net[@]}" CMD &
#                               then leaves CMD's own pid in $!

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="deploy/test"
export PYTHONDONTWRITEBYTECODE=1   # leave no __pycache__ in deploy/

say() { printf '%s\n' "$*"; }
step() { printf '\n--- %s\n' "$*"; }
die() { printf '\n%s: FAILED: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }
skips=()
skip() { say "  SKIP $*"; skips+=("$*"); }

ensure_tools() {
  nats_server="${ORRERY_NATS_SERVER:-}"
  if [ -z "$nats_server" ]; then
    nats_server="$("$root/scripts/ensure-nats.sh")" || die "no nats-server (scripts/ensure-nats.sh failed)"
  fi
  [ -x "$nats_server" ] || die "nats-server not executable: $nats_server"
  say "  nats-server: $nats_server ($("$nats_server" --version))"
  command -v openssl >/dev/null || die "openssl is needed (deploy/nats/gen-certs.sh makes the test certificates; Debian: apt-get install openssl)"

  venv="$root/.tools/deploy-venv"
  py="$venv/bin/python"
  # Pinned: the versions these checks were written against.
  local requirements="helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 nats-py==2.16.0 nkeys==0.2.1 PyYAML==6.0.4"
  if [ ! -x "$py" ] || [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$requirements" ]; then
    say "  installing into $venv from PyPI: $requirements"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    # shellcheck disable=SC2086
    "$py" -m pip install --quiet --disable-pip-version-check $requirements || die "pip install failed"
    printf '%s' "$requirements" > "$venv/.requirements"
  fi
  say "  python venv: $venv ($requirements)"
}

tls_copy() {
  local dir=$1 f
  mkdir -p "$dir"
  cp -r "$root/deploy/nats/." "$dir/"
  sh "$root/deploy/nats/gen-certs.sh" --out "$dir/tls" >/dev/null || die "gen-certs.sh --out $dir/tls"
  for f in "$dir"/single/*.conf "$dir"/cluster/*.conf "$dir"/leaf/*.conf; do
    sed -i "s|/etc/orrery/nats/tls/|$dir/tls/|g" "$f"
  done
}

every_target_copy() {
  local dir=$1
  tls_copy "$dir"
  # users.conf's explicit opt-in: one shared satellite and leaf identity for every target.
  sed -i 's/^#opt-in: //' "$dir/users.conf"
  grep -q '^include "permissions-every-target.conf"' "$dir/users.conf" || die "users.conf has no every-target opt-in to enable"
}

fleet_config() {
  local dir=$1 name args=()
  shift
  for name in "$@"; do args+=(--satellite "$name" --leaf "$name"); done
  tls_copy "$dir"
  "$py" "$root/deploy/nats/gen-nkeys.py" --out "$dir/keys" "${args[@]}" >/dev/null \
    || die "gen-nkeys.py ${args[*]}"
  cp "$dir/keys/users.conf" "$dir/users.conf"
}

env_file_args() {
  local line
  cat "$@" | while IFS= read -r line; do
    case "$line" in ''|'#'*) ;; *) printf '%s\n' "$line" ;; esac
  done
}

why_no_private_net() {
  if [ "$(id -u)" -ne 0 ]; then
    say "needs root for private network namespaces"
  elif ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
    say "unshare or ip (iproute2) missing"
  elif ! unshare --net --mount true 2>/dev/null; then
    say "this sandbox refuses new network namespaces"
  elif [ "${1:-}" = netns ]; then
    local probe="orrery-probe-$$"
    if ! ip netns add "$probe" 2>/dev/null; then
      say "ip netns add fails here (named network namespaces unavailable)"
      return 0
    fi
    if ip -n "$probe" link add "op$$x" type veth peer name "op$$y" 2>/dev/null; then
      ip netns del "$probe"
      return 1
    fi
    ip netns del "$probe" 2>/dev/null
    say "veth links cannot be made here"
  else
    return 1
  fi
}

private_net_cmd() {
  local netns=$1 hosts=$2 varlib=$3
  # shellcheck disable=SC2016
  local setup='set -e
    ip link set lo up
    mount --bind "$1" /etc/hosts
    case "$2" in "") ;; tmpfs) mount -t tmpfs tmpfs /var/lib ;; *) mount --bind "$2" /var/lib ;; esac
    shift 2
    exec "$@"'
  if [ -z "$netns" ]; then
    private_net=(unshare --net --mount sh -c "$setup" _ "$hosts" "$varlib")
  else
    # `ip netns exec` gives the command its own mount namespace (slave to
    # the host's), so these mounts stay private to it.
    private_net=(ip netns exec "$netns" sh -c "$setup" _ "$hosts" "$varlib")
  fi
}

in_private_net() {
  private_net_cmd "$1" "$2" "$3"
  shift 3
  "${private_net[@]}" "$@"
}
