#!/bin/sh
# Generate the TLS certificates of an Orrery NATS deployment with openssl.
#
#   deploy/nats/gen-certs.sh --out /etc/orrery/nats/tls [--san NAME|IP]... [--client NAME]... [--days N]
#
# Writes, into --out (keys mode 0600; give the server user read access to its own):
#
#   ca.crt, ca.key           the CA of client, leaf and server certificates
#   server.crt, server.key   the NATS servers' certificate (client port 4222,
#                            leaf node port 7422); names: localhost,
#                            127.0.0.1, nats, nats-a, nats-b, nats-c and
#                            every --san
#   route-ca.crt, route-ca.key  a CA for cluster routes ONLY: a certificate
#                            from ca.crt (a satellite's, a leaf's) can never
#                            join the cluster as a route
#   route.crt, route.key     the certificate every cluster node presents on
#                            its route port (6222) and to the routes it
#                            dials: names nats-a, nats-b, nats-c, localhost
#                            and every --san, and the route identity
#                            "orrery-route" the cluster configs map it to
#                            (cluster.authorization.user, verify_and_map)
#   <name>.crt, <name>.key   with --client NAME: a client certificate (for
#                            --tls-cert/--tls-key when a server verifies
#                            clients, or a leaf's remote tls block)
#
# Existing CAs and keys are kept, so re-running adds names and clients
# without replacing what servers already trust; certificates are re-issued.
# The CA keys (ca.key, route-ca.key) are needed only to issue certificates:
# keep them off the servers (move them away once the servers have theirs).
#
# Which files go where (deploy/README.md, "Security"):
#   every NATS server: ca.crt, server.crt, server.key
#   cluster nodes:     also route-ca.crt, route.crt, route.key
#   leaf nodes:        ca.crt (verifies the core)
#   satellites, primary: ca.crt (--tls-ca / ORRERY_TLS_CA), and their
#                      client certificate if the servers verify clients
set -eu

out="" days=825 sans="" clients=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --san) sans="$sans $2"; shift 2 ;;
    --client) clients="$clients $2"; shift 2 ;;
    --days) days=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "gen-certs.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "gen-certs.sh: --out DIR is required" >&2; exit 2; }
command -v openssl >/dev/null || { echo "gen-certs.sh: needs openssl" >&2; exit 1; }
for n in $clients; do
  case "$n" in ca|route-ca|server|route|*[!A-Za-z0-9_.-]*|'') echo "gen-certs.sh: invalid client name $n" >&2; exit 2 ;; esac
done

umask 077
mkdir -p "$out"
chmod 755 "$out"
cd "$out"

key() { # FILE: a P-256 key, kept if it exists
  [ -s "$1" ] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
  chmod 600 "$1"
}
ca() { # NAME SUBJECT
  key "$1.key"
  if [ ! -s "$1.crt" ]; then
    openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "$2" \
      -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.crt" 2>/dev/null
  fi
  chmod 644 "$1.crt"
}
san_list() { # NAME...: subjectAltName value
  list=""
  for n in "$@"; do
    case "$n" in
      *:*) entry="IP:$n" ;;        # IPv6
      *[!0-9.]*) entry="DNS:$n" ;;
      *) entry="IP:$n" ;;          # IPv4
    esac
    case ",$list," in *",$entry,"*) ;; *) list="${list:+$list,}$entry" ;; esac
  done
  printf '%s' "$list"
}
issue() { # NAME CA CN EKU SANS
  key "$1.key"
  ext="$1.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyAgreement"
    echo "extendedKeyUsage=$4"
    [ -z "$5" ] || echo "subjectAltName=$5"
  } > "$ext"
  openssl req -new -key "$1.key" -subj "/O=Orrery/CN=$3" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -sha256 \
    -days "$days" -extfile "$ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$ext"
  chmod 644 "$1.crt"
}

ca ca "/O=Orrery/CN=Orrery NATS CA"
ca route-ca "/O=Orrery/CN=Orrery NATS route CA"
# shellcheck disable=SC2086
issue server ca nats serverAuth "$(san_list localhost 127.0.0.1 ::1 nats nats-a nats-b nats-c $sans)"
# shellcheck disable=SC2086
issue route route-ca orrery-route serverAuth,clientAuth \
  "$(san_list orrery-route localhost 127.0.0.1 nats-a nats-b nats-c $sans)"
for n in $clients; do
  issue "$n" ca "$n" clientAuth "$(san_list "$n")"
done
rm -f ./*.srl

for f in ca.crt server.crt route-ca.crt route.crt; do
  printf '%-16s %s\n' "$f" "$(openssl x509 -in "$f" -noout -subject -enddate | tr '\n' ' ')"
done
for n in $clients; do printf '%-16s %s\n' "$n.crt" "$(openssl x509 -in "$n.crt" -noout -subject | tr '\n' ' ')"; done
