#!/usr/bin/env python3
"""Generate NATS nkeys for an Orrery deployment.

Writes, into --out:

  <name>.nk    the seed of each identity (secret; mode 0600), the file a
               client is given: orrery-satellite --nats-nkey FILE
  <name>.pub   its public key
  nkeys.env    ORRERY_NKEY_PRIMARY=U... etc., the variables that
               deploy/nats/users.conf reads (one key per role; written
               only when each role has one identity)
  users.conf   a users file listing every public key literally with its
               role's permissions: a drop-in replacement for
               deploy/nats/users.conf when each satellite or leaf has its
               own key
  leaf-<name>.env  ORRERY_LEAF_NKEY_SEED=SU..., for each leaf node server
               (deploy/nats/leaf/leaf.conf reads it; secret, mode 0600)
  <secret>.secret.yaml  with --k8s-secret NAME: the Kubernetes Secret the
               Helm chart expects (natsClient.auth.secretName): primary.nk,
               satellite.nk and the ORRERY_NKEY_* public keys (mode 0600)
  FILE         with --helm-values FILE: Helm values for helm/orrery whose
               bundled NATS gives the satellite and leaf users exactly the
               permissions of --satellite/--leaf (helm install -f FILE); no
               secrets in it

Identities: one primary, one sysadmin, the satellites given with
--satellite (default: one called "satellite") and the leaf nodes given
with --leaf (default: one called "leaf"). Existing seed files are kept,
so re-running adds identities without rotating the others.

What a satellite or leaf may serve:

  --satellite NAME                         every target of every plugin
                                           (the role's shared permission set,
                                           $SATELLITE_PERMISSIONS / $LEAF_PERMISSIONS)
  --satellite NAME=PLUGIN:TARGET[,...]     only these operation subjects,
                                           orrery.op.PLUGIN.TARGET, and these
                                           describe subjects,
                                           orrery.describe.PLUGIN.TARGET;
                                           TARGET * = every target of PLUGIN
                                           (and orrery.describe.PLUGIN)
  e.g. --satellite site-b=local:site-b,testbed:site-b --leaf site-b=local:site-b,testbed:site-b

A satellite given targets this way must serve exactly those targets (its
`targets = [...]` / --target; a satellite without targets subscribes to
orrery.op.PLUGIN.*, which needs PLUGIN:*). Every satellite key may answer
only the requests it was given (allow_responses: --max-responses, default
2: a receipt and the answer, see satellite --receipts; within --response-expiry, default 15m). A leaf connection cannot be
bounded that way by nats-server (nats-io/nats-server#2949), so a leaf's
per-target set restricts what the core sends it, and it may publish only
reply subjects (_INBOX.>); its satellites are bounded by the leaf server.

Needs the `nkeys` package (pip install nkeys; it pulls in PyNaCl). The Go
tools do the same: `nk -gen user -pubout` from github.com/nats-io/nkeys.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

try:
    import nacl.signing
    import nkeys
except ImportError:  # pragma: no cover - message for operators
    sys.exit("gen-nkeys.py needs the nkeys package: python3 -m pip install nkeys")

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# One NATS subject token: no dots, no wildcards, no spaces.
TOKEN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
EXPIRY = re.compile(r"^[0-9]+(ms|s|m|h)$")

# What the satellite's NATS service (relay.rs, async-nats' service API)
# subscribes to: $SRV.<VERB>, $SRV.<VERB>.<name>, $SRV.<VERB>.<name>.<id>.
SERVICE_SUBJECTS = [
    "$SRV.PING", "$SRV.INFO", "$SRV.STATS",
    "$SRV.*.orrery-satellite", "$SRV.*.orrery-satellite.*",
]


def parse_identity(spec: str, kind: str) -> tuple[str, list[tuple[str, str]] | None]:
    """NAME or NAME=PLUGIN:TARGET,... -> (NAME, [(plugin, target)] or None = everything)."""
    name, sep, rest = spec.partition("=")
    if not sep:
        return name, None
    pairs = []
    for item in rest.split(","):
        plugin, colon, target = item.strip().partition(":")
        if not colon or not TOKEN.match(plugin) or not (target == "*" or TOKEN.match(target)):
            raise ValueError(f"--{kind} {spec!r}: {item!r} is not PLUGIN:TARGET (names without dots; TARGET may be *)")
        if (plugin, target) not in pairs:
            pairs.append((plugin, target))
    if not pairs:
        raise ValueError(f"--{kind} {spec!r}: no PLUGIN:TARGET after '='")
    return name, pairs


def subscribe_subjects(pairs: list[tuple[str, str]]) -> list[str]:
    """What a satellite serving `pairs` subscribes to, and nothing else."""
    ops = [f"orrery.op.{p}.{t}" for p, t in pairs]
    # Its direct subjects (orrery.op.PLUGIN.TARGET.<instance id>): a primary
    # addresses a live satellite of these targets alone (satellite --receipts).
    ops += [f"orrery.op.{p}.{t}.*" for p, t in pairs]
    # Describe per target (orrery.describe.PLUGIN.TARGET), so no other
    # site's satellite can answer for these targets' schemas; the
    # plugin-wide orrery.describe.PLUGIN only with every target (PLUGIN:*),
    # whose satellites are trusted with every target of it anyway.
    describe = [f"orrery.describe.{p}.{t}" for p, t in pairs]
    describe += [f"orrery.describe.{p}" for p in dict.fromkeys(p for p, t in pairs if t == "*")]
    return ops + describe + SERVICE_SUBJECTS


def permission_set(policy: str, name: str) -> str:
    """The `NAME: { ... }` block of permissions.conf, verbatim."""
    start = policy.index(f"\n{name}: {{") + 1
    depth = 0
    for i in range(start, len(policy)):
        if policy[i] == "{":
            depth += 1
        elif policy[i] == "}":
            depth -= 1
            if depth == 0:
                return policy[start:i + 1]
    raise ValueError(f"permissions.conf: {name} is not closed")


# helm/orrery/values.yaml's primary user (deploy/nats/permissions.conf's
# PRIMARY_PERMISSIONS); deploy/test/check.sh proves the rendered policy.
PRIMARY_PUBLISH = ["orrery.op.>", "orrery.describe.>", "$SRV.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", "$O.>"]
EVERY_TARGET = ["orrery.op.>", "orrery.describe.>"]


def write_helm_values(path: Path, sat_pairs, leaf_pairs, max_responses: int, expires: str) -> None:
    def subs(pairs):
        return subscribe_subjects(pairs) if pairs is not None else EVERY_TARGET + SERVICE_SUBJECTS

    users = [
        {"nkey": "<< $ORRERY_NKEY_PRIMARY >>",
         "permissions": {"publish": {"allow": PRIMARY_PUBLISH}, "subscribe": {"allow": ["_INBOX.>"]}}},
        {"nkey": "<< $ORRERY_NKEY_SATELLITE >>",
         "permissions": {"publish": {"allow": []}, "subscribe": {"allow": subs(sat_pairs)},
                         "allow_responses": {"max": max_responses if sat_pairs is not None else 2,
                                             "expires": expires if sat_pairs is not None else "15m"}}},
        {"nkey": "<< $ORRERY_NKEY_LEAF >>",
         "permissions": {"publish": {"allow": ["_INBOX.>"]}, "subscribe": {"allow": subs(leaf_pairs)}}},
    ]
    merge = {"accounts": {"ORRERY": {"jetstream": "enabled", "users": users},
                          "SYS": {"users": [{"nkey": "<< $ORRERY_NKEY_SYSADMIN >>"}]}},
             "system_account": "SYS"}
    doc = {"nats": {"config": {"merge": merge}}}
    if sat_pairs is None or leaf_pairs is None or any(t == "*" for _, t in [*(sat_pairs or []), *(leaf_pairs or [])]):
        # Every target (of a plugin): the chart's explicit opt-in.
        doc["satellite"] = {"everyTarget": True}
        if sat_pairs is None or any(t == "*" for _, t in sat_pairs):
            doc["satellite"]["targets"] = []
    if sat_pairs is not None and all(t != "*" for _, t in sat_pairs):
        # The satellites must serve exactly these targets (the chart checks
        # satellite.plugins against the permissions when rendering).
        doc.setdefault("satellite", {})["targets"] = list(dict.fromkeys(t for _, t in sat_pairs))
    header = ("# Generated by deploy/nats/gen-nkeys.py: helm/orrery values giving the bundled NATS's\n"
              "# satellite and leaf users only these subjects. JSON is YAML: helm install -f this file.\n")
    path.write_text(header + json.dumps(doc, indent=2) + "\n")


def conf_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def satellite_permissions(pairs, max_responses: int, expires: str) -> str:
    return ("{ publish: { allow: [] }, subscribe: { allow: " + conf_list(subscribe_subjects(pairs)) + " }, "
            f'allow_responses: {{ max: {max_responses}, expires: "{expires}" }} }}')


def leaf_permissions(pairs) -> str:
    # Seen from the core: subscribe = what the core sends to the leaf,
    # publish = what the leaf sends into the core (only reply subjects).
    return ('{ publish: { allow: ["_INBOX.>"] }, subscribe: { allow: '
            + conf_list(subscribe_subjects(pairs)) + " } }")


def new_seed() -> bytes:
    raw = bytes(nacl.signing.SigningKey.generate())
    return nkeys.encode_seed(raw, nkeys.PREFIX_BYTE_USER)


def public_key(seed: bytes) -> str:
    kp = nkeys.from_seed(bytearray(seed))
    return kp.public_key.decode()


def write_secret(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def identity(out: Path, name: str) -> tuple[str, str]:
    """(seed, public key) of `name`, created when missing."""
    seed_file = out / f"{name}.nk"
    if seed_file.exists():
        seed = seed_file.read_text().strip().encode()
    else:
        seed = new_seed()
        write_secret(seed_file, seed.decode() + "\n")
    pub = public_key(seed)
    (out / f"{name}.pub").write_text(pub + "\n")
    return seed.decode(), pub


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="directory to write keys into")
    p.add_argument("--satellite", action="append", default=[], metavar="NAME[=PLUGIN:TARGET,...]",
                   help="a satellite identity, optionally limited to these operation subjects "
                        "(repeatable; default: 'satellite', every target)")
    p.add_argument("--leaf", action="append", default=[], metavar="NAME[=PLUGIN:TARGET,...]",
                   help="a leaf node identity, optionally limited to what its satellites serve "
                        "(repeatable; default: 'leaf', every target)")
    p.add_argument("--max-responses", type=int, default=2, metavar="N",
                   help="replies a per-target satellite key may send per request received "
                        "(default 2: a receipt and the answer)")
    p.add_argument("--response-expiry", default="15m", metavar="DURATION",
                   help="how long after a request its reply is allowed (default 15m; longer than "
                        "the slowest single plugin call)")
    p.add_argument("--k8s-secret", metavar="NAME",
                   help="also write NAME.secret.yaml, the Secret helm/orrery reads (one satellite and one leaf identity)")
    p.add_argument("--namespace", help="namespace of that Secret (default: none, kubectl -n decides)")
    p.add_argument("--helm-values", type=Path, metavar="FILE",
                   help="also write Helm values (nats.config.merge) with these identities' permissions "
                        "(one satellite and one leaf identity)")
    args = p.parse_args()

    try:
        sat_specs = dict(parse_identity(s, "satellite") for s in (args.satellite or ["satellite"]))
        leaf_specs = dict(parse_identity(s, "leaf") for s in (args.leaf or ["leaf"]))
    except ValueError as e:
        p.error(str(e))
    if len(sat_specs) != len(args.satellite or ["satellite"]) or len(leaf_specs) != len(args.leaf or ["leaf"]):
        p.error("identity names must be distinct")
    if not 1 <= args.max_responses <= 1000:
        p.error("--max-responses must be between 1 and 1000")
    if not EXPIRY.match(args.response_expiry):
        p.error("--response-expiry must look like 15m, 90s or 1h")
    satellites = list(sat_specs)
    leaves = list(leaf_specs)
    names = ["primary", "sysadmin", *satellites, *(f"leaf-{n}" if n != "leaf" else n for n in leaves)]
    for n in satellites + leaves:
        if not NAME.match(n) or n in ("primary", "sysadmin"):
            p.error(f"invalid identity name {n!r}")
    if len(set(names)) != len(names):
        p.error("identity names must be distinct")

    args.out.mkdir(parents=True, exist_ok=True)
    os.chmod(args.out, 0o700)
    keys = {n: identity(args.out, n) for n in names}

    lines = [
        "# Generated by deploy/nats/gen-nkeys.py: Orrery NATS identities.",
        "# Public keys only. Identities with targets (NAME=PLUGIN:TARGET,...) get their",
        "# own set inline: only those operation subjects. Identities made without targets",
        "# (an explicit opt-in) get the every-target set of permissions-every-target.conf.",
        "",
        'include "permissions.conf"',
        "",
        "ORRERY_USERS: [",
        f'  {{ nkey: "{keys["primary"][1]}", permissions: $PRIMARY_PERMISSIONS }}  # primary',
    ]
    def serves(pairs) -> str:
        return "every target" if pairs is None else ", ".join(f"{p}:{t}" for p, t in pairs)

    for n in satellites:
        pairs = sat_specs[n]
        perms = "$SATELLITE_PERMISSIONS" if pairs is None else satellite_permissions(
            pairs, args.max_responses, args.response_expiry)
        lines.append(f'  # satellite {n}: {serves(pairs)}')
        lines.append(f'  {{ nkey: "{keys[n][1]}", permissions: {perms} }}')
    for n in leaves:
        key = n if n == "leaf" else f"leaf-{n}"
        pairs = leaf_specs[n]
        perms = "$LEAF_PERMISSIONS" if pairs is None else leaf_permissions(pairs)
        lines.append(f'  # leaf {n}: {serves(pairs)}')
        lines.append(f'  {{ nkey: "{keys[key][1]}", permissions: {perms} }}')
    lines += [
        "]",
        "",
        "SYS_USERS: [",
        f'  {{ nkey: "{keys["sysadmin"][1]}" }}  # sysadmin',
        "]",
        "",
    ]
    # permissions.conf holds the primary's set (always used); the
    # every-target sets (an opt-in) are copied in only when an identity
    # uses them: nats-server refuses a variable defined and never used.
    used = [v for v in ("SATELLITE_PERMISSIONS", "LEAF_PERMISSIONS") if any(f"${v}" in line for line in lines)]
    if used:
        at = lines.index('include "permissions.conf"') + 1
        try:
            policy = (Path(__file__).resolve().parent / "permissions-every-target.conf").read_text()
        except OSError:
            p.error("identities for every target need deploy/nats/permissions-every-target.conf beside gen-nkeys.py")
        lines[at:at] = ["# Every-target sets (an opt-in), from permissions-every-target.conf:"] + [
            permission_set(policy, v) for v in used]
    (args.out / "users.conf").write_text("\n".join(lines))

    # nkeys.env feeds the shipped users.conf, whose sets cover every target:
    # for identities limited to targets only the generated users.conf is right.
    limited = any(v is not None for v in (*sat_specs.values(), *leaf_specs.values()))
    if len(satellites) == 1 and len(leaves) == 1 and not limited:
        leaf_key = leaves[0] if leaves[0] == "leaf" else f"leaf-{leaves[0]}"
        env = [
            "# Generated by deploy/nats/gen-nkeys.py: public keys for deploy/nats/users.conf",
            f"ORRERY_NKEY_PRIMARY={keys['primary'][1]}",
            f"ORRERY_NKEY_SATELLITE={keys[satellites[0]][1]}",
            f"ORRERY_NKEY_LEAF={keys[leaf_key][1]}",
            f"ORRERY_NKEY_SYSADMIN={keys['sysadmin'][1]}",
            "",
        ]
        (args.out / "nkeys.env").write_text("\n".join(env))

    for n in leaves:
        key = n if n == "leaf" else f"leaf-{n}"
        write_secret(
            args.out / f"{key}.env",
            "# Generated by deploy/nats/gen-nkeys.py: the seed leaf/leaf.conf connects with (secret)\n"
            f"ORRERY_LEAF_NKEY_SEED={keys[key][0]}\n",
        )

    if args.k8s_secret:
        if len(satellites) != 1 or len(leaves) != 1:
            p.error("--k8s-secret needs exactly one satellite and one leaf identity")
        leaf_key = leaves[0] if leaves[0] == "leaf" else f"leaf-{leaves[0]}"
        meta = {"name": args.k8s_secret, **({"namespace": args.namespace} if args.namespace else {})}
        data = {
            "primary.nk": keys["primary"][0],
            "satellite.nk": keys[satellites[0]][0],
            "ORRERY_NKEY_PRIMARY": keys["primary"][1],
            "ORRERY_NKEY_SATELLITE": keys[satellites[0]][1],
            "ORRERY_NKEY_LEAF": keys[leaf_key][1],
            "ORRERY_NKEY_SYSADMIN": keys["sysadmin"][1],
        }
        # JSON is YAML: no YAML library needed.
        doc = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "stringData": data}
        write_secret(args.out / f"{args.k8s_secret}.secret.yaml", json.dumps(doc, indent=2) + "\n")

    if args.helm_values:
        if len(satellites) != 1 or len(leaves) != 1:
            p.error("--helm-values needs exactly one satellite and one leaf identity")
        write_helm_values(args.helm_values, sat_specs[satellites[0]], leaf_specs[leaves[0]],
                          args.max_responses, args.response_expiry)

    for n in names:
        print(f"{n:<20} {keys[n][1]}  ({args.out / (n + '.nk')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
