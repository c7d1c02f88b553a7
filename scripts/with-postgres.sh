#!/usr/bin/env bash
# Runs CMD with a throwaway PostgreSQL server of its own:
#
#   scripts/with-postgres.sh cargo test -p orrery-state --test it store_conformance
#
# The server listens on 127.0.0.1 at a free random port, trusts local
# connections, has TLS on (a throwaway CA and a server certificate for
# 127.0.0.1 and localhost are made with openssl; plaintext stays allowed
# for clients that ask for it, sslmode=disable), lives in a
# fresh temporary directory, and is stopped and removed when CMD ends (or
# fails, or is interrupted). CMD gets
#
#   ORRERY_TEST_DATABASE_URL=postgres://orrery@127.0.0.1:PORT/postgres?sslmode=verify-full&sslrootcert=DIR%2Fca.crt
#   ORRERY_TEST_DATABASE_CA=DIR/ca.crt (the CA's certificate)
#   ORRERY_TEST_DATABASE_LOG=DIR/server.log (the server's log)
#
# (a superuser: tests create a database of their own per test; the
# certificate path is percent-encoded, so the URL has no '/' after the
# database name). CMD's exit status is the script's.
#
# PostgreSQL (15 or newer) comes from, in order: $ORRERY_PG_BIN (a directory
# holding initdb and pg_ctl), initdb on PATH, /usr/local/bin,
# /usr/lib/postgresql/*/bin (newest first); when none is there and this runs
# as root, Debian's `postgresql` package is installed. PostgreSQL refuses to
# run as root, so as root the server runs as an unprivileged user:
# $ORRERY_PG_USER, else `postgres` when it exists, else `nobody`.
set -euo pipefail

if [ $# -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi

say() { printf 'with-postgres: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 1
}

find_pg_bin() {
    local candidates=()
    [ -n "${ORRERY_PG_BIN:-}" ] && candidates+=("$ORRERY_PG_BIN/initdb")
    command -v initdb >/dev/null 2>&1 && candidates+=("$(command -v initdb)")
    candidates+=(/usr/local/bin/initdb)
    local d
    while IFS= read -r d; do
        candidates+=("$d/initdb")
    done < <(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r)
    local c
    for c in "${candidates[@]}"; do
        if [ -x "$c" ] && [ -x "$(dirname "$c")/pg_ctl" ]; then
            dirname "$c"
            return 0
        fi
    done
    return 1
}

PG_BIN="$(find_pg_bin || true)"
if [ -z "$PG_BIN" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        die "PostgreSQL (initdb, pg_ctl) not found, and not root to install it: install Debian's 'postgresql' package (apt-get install postgresql) or set ORRERY_PG_BIN to the directory holding initdb and pg_ctl"
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "PostgreSQL (initdb, pg_ctl) not found and no apt-get to install it: install PostgreSQL 15 or newer, or set ORRERY_PG_BIN"
    say "installing Debian's postgresql package (no cluster is created or started by it)"
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        mkdir -p /etc/postgresql-common
        echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold postgresql >&2 ||
        die "apt-get install postgresql failed"
    PG_BIN="$(find_pg_bin || true)"
    [ -n "$PG_BIN" ] || die "postgresql installed, but initdb/pg_ctl still not found under /usr/lib/postgresql/*/bin"
fi

version="$("$PG_BIN/initdb" --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')"
if [ "${version:-0}" -lt 15 ] 2>/dev/null; then
    die "PostgreSQL $version at $PG_BIN is too old: 15 or newer is needed"
fi

# Who runs the server.
if [ "$(id -u)" -eq 0 ]; then
    PG_USER="${ORRERY_PG_USER:-}"
    if [ -z "$PG_USER" ]; then
        if id -u postgres >/dev/null 2>&1; then PG_USER=postgres; else PG_USER=nobody; fi
    fi
    id -u "$PG_USER" >/dev/null 2>&1 || die "user '$PG_USER' (to run PostgreSQL as) does not exist"
    command -v runuser >/dev/null 2>&1 || die "runuser (util-linux) is needed to run PostgreSQL as '$PG_USER'"
    as_pg() { runuser -u "$PG_USER" -- "$@"; }
else
    PG_USER="$(id -un)"
    as_pg() { "$@"; }
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/orrery-pg.XXXXXX")"
DATA="$WORK/data"
LOG="$WORK/server.log"
started=""

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$started" ] && [ -f "$DATA/postmaster.pid" ]; then
        if ! as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >/dev/null 2>&1; then
            local pid
            pid="$(head -n1 "$DATA/postmaster.pid" 2>/dev/null || true)"
            [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" -eq 0 ]; then
    chown "$PG_USER" "$WORK"
    # The user must reach the directory: every parent needs search permission.
    as_pg test -w "$WORK" || die "'$PG_USER' cannot write to $WORK (set TMPDIR to a directory it can reach)"
fi

as_pg "$PG_BIN/initdb" -D "$DATA" -U orrery --auth=trust --encoding=UTF8 --no-locale \
    --no-sync >"$WORK/initdb.log" 2>&1 ||
    { cat "$WORK/initdb.log" >&2; die "initdb failed"; }

# TLS: a CA made for this run and a server certificate it signs, valid for
# the addresses clients use (so sslmode=verify-full holds).
command -v openssl >/dev/null 2>&1 || die "openssl is needed to make the server's TLS certificate (apt-get install openssl)"
TLS="$WORK/tls"
mkdir -p "$TLS"
{
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=orrery throwaway test CA" \
        -keyout "$TLS/ca.key" -out "$TLS/ca.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
        openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
            -keyout "$TLS/server.key" -out "$TLS/server.csr" &&
        printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
            "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
            >"$TLS/server.ext" &&
        openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.crt" -CAkey "$TLS/ca.key" \
            -CAcreateserial -days 2 -extfile "$TLS/server.ext" -out "$TLS/server.crt"
} >"$WORK/openssl.log" 2>&1 || { cat "$WORK/openssl.log" >&2; die "openssl could not make the test certificates"; }
chmod 0600 "$TLS/server.key" "$TLS/ca.key"
chmod 0755 "$TLS"
chmod 0644 "$TLS/ca.crt" "$TLS/server.crt"
if [ "$(id -u)" -eq 0 ]; then chown "$PG_USER" "$TLS/server.key"; fi

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

started=1 # from here on, cleanup stops whatever pg_ctl may have started
for attempt in 1 2 3 4 5 6 7 8; do
    PORT=$((20000 + RANDOM % 40000))
    port_in_use "$PORT" && continue
    # fsync off and friends: a throwaway server need not survive a crash.
    if as_pg "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 -s \
        -o "-c listen_addresses=127.0.0.1 -c port=$PORT -c unix_socket_directories=$WORK \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
            -c max_connections=300 -c log_min_messages=warning \
            -c ssl=on -c ssl_cert_file=$TLS/server.crt -c ssl_key_file=$TLS/server.key" \
        start >/dev/null 2>&1; then
        PORT_OK=1
        break
    fi
    if grep -q "could not bind\|Address already in use\|could not create any TCP/IP sockets" "$LOG" 2>/dev/null; then
        say "port $PORT taken (attempt $attempt), trying another"
        : >"$LOG"
        continue
    fi
    cat "$LOG" >&2 || true
    die "PostgreSQL did not start within 60 s (log above)"
done
[ -n "${PORT_OK:-}" ] || die "no free port found for PostgreSQL after 8 attempts"

# pg_ctl -w returns once the server reports ready; confirm it takes TCP
# connections on the port (bounded: 30 s).
if command -v pg_isready >/dev/null 2>&1 || [ -x "$PG_BIN/pg_isready" ]; then
    isready="$(command -v pg_isready || echo "$PG_BIN/pg_isready")"
    deadline=$((SECONDS + 30))
    until "$isready" -q -h 127.0.0.1 -p "$PORT" -U orrery -d postgres; do
        [ "$SECONDS" -lt "$deadline" ] || { cat "$LOG" >&2; die "PostgreSQL on 127.0.0.1:$PORT does not accept connections after 30 s"; }
        sleep 0.1
    done
else
    deadline=$((SECONDS + 30))
    until port_in_use "$PORT"; do
        [ "$SECONDS" -lt "$deadline" ] || { cat "$LOG" >&2; die "PostgreSQL on 127.0.0.1:$PORT does not accept connections after 30 s"; }
        sleep 0.1
    done
fi

ca_in_url="$(printf '%s' "$TLS/ca.crt" | sed 's/%/%25/g; s/\//%2F/g; s/ /%20/g; s/&/%26/g')"
export ORRERY_TEST_DATABASE_URL="postgres://orrery@127.0.0.1:$PORT/postgres?sslmode=verify-full&sslrootcert=$ca_in_url"
export ORRERY_TEST_DATABASE_CA="$TLS/ca.crt"
# The server's log, for tests that check what it never shows.
export ORRERY_TEST_DATABASE_LOG="$LOG"
say "PostgreSQL $version ($PG_BIN, as $PG_USER) on 127.0.0.1:$PORT; ORRERY_TEST_DATABASE_URL=$ORRERY_TEST_DATABASE_URL"

# CMD runs in the foreground (a Ctrl-C reaches it as usual); the EXIT trap
# stops the server however it ends.
set +e
"$@"
rc=$?
set -e
exit "$rc"
