#!/usr/bin/env python3
"""Render, lint and validate the Helm chart offline.

Run by deploy/test/check.sh in its venv (helm-python-sdk: Helm's Go SDK as a
shared library, no helm binary; kubernetes-validate: Kubernetes OpenAPI
schemas shipped in the package).

  chart_check.py --chart helm/orrery --out DIR [--accounts-out FILE]

For the default values, ci/values-large.yaml and a few more value sets:
lints the chart (errors always fail; the only tolerated warning is the
missing `nats` subchart, which `helm dependency build` fetches from the
network), renders it, writes every manifest to DIR/<case>/, validates each
document with kubernetes-validate --strict semantics, and checks the
chart's own promises (drain grace, probes, autoscaling, disruption budget).
Value sets that must be refused (a termination grace shorter than the drain,
PostgreSQL without a URL, ...) must fail to render.

--accounts-out writes the NATS accounts of values.yaml (nats.config.merge)
as a nats-server config file, so check.sh can run the same permission test
against the chart's policy as against deploy/nats's.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import yaml

# The oldest Kubernetes the chart supports that the package has schemas for,
# and the newest it has.
KUBE_VERSION = "1.30.0"
KUBE_VERSIONS = (KUBE_VERSION, kubernetes_validate.utils.latest_version())
TOLERATED_LINT_WARNINGS = ("chart directory is missing these dependencies: nats",)

failures: list[str] = []
passes = 0


def ok(msg: str) -> None:
    global passes
    passes += 1
    print(f"  ok   {msg}", flush=True)


def fail(msg: str) -> None:
    failures.append(msg)
    print(f"  FAIL {msg}", flush=True)


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def lint(chart: Path, name: str, values: dict | None) -> None:
    report = helm.lint(str(chart), values, strict=False, kube_version=f"v{KUBE_VERSION}")
    bad = []
    for m in report.get("messages", []):
        sev, text = m.get("severity", 0), m.get("error", "")
        if sev >= 3 or (sev == 2 and not any(t in text for t in TOLERATED_LINT_WARNINGS)):
            bad.append(f"[{sev}] {m.get('path')}: {text}")
    bad += [e for e in report.get("errors", []) if not any(t in e for t in TOLERATED_LINT_WARNINGS)]
    if bad:
        fail(f"helm lint ({name}): " + "; ".join(bad))
    else:
        notes = [m["error"] for m in report.get("messages", [])]
        ok(f"helm lint ({name}) passes" + (f"; notes: {'; '.join(notes)}" if notes else ""))


def render(chart: helm.Chart, values: dict | None) -> dict[str, str]:
    return chart.render(values=values, name="orrery", namespace="orrery", is_install=True)


def documents(rendered: dict[str, str]) -> list[tuple[str, dict]]:
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append((path, doc))
    return docs


def validate(case: str, docs: list[tuple[str, dict]], out: Path) -> None:
    case_dir = out / case
    case_dir.mkdir(parents=True, exist_ok=True)
    for i, (path, doc) in enumerate(docs):
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
        (case_dir / f"{i:02d}-{kind}-{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        if str(doc.get("apiVersion", "")).startswith("cert-manager.io/"):
            continue  # a custom resource: no Kubernetes schema (secure_defaults checks its fields)
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                fail(f"{case}: {kind}/{name} ({path}) is invalid for Kubernetes {version}: {e.message} at {list(e.path)}")
            except kubernetes_validate.SchemaNotFoundError as e:
                fail(f"{case}: {kind}/{name}: no schema for Kubernetes {version} ({e})")
    kinds = sorted(f"{d.get('kind')}/{d['metadata']['name']}" for _, d in docs)
    if not any(f.startswith(f"{case}:") for f in failures):
        ok(f"{case}: {len(docs)} manifests valid against Kubernetes {' and '.join(KUBE_VERSIONS)} schemas (strict): {', '.join(kinds)}")


def find(docs, kind, suffix=None):
    for _, d in docs:
        if d.get("kind") == kind and (suffix is None or d["metadata"]["name"].endswith(suffix)):
            return d
    return None


def promises(case: str, docs, values: dict) -> None:
    """The chart's own guarantees, read from the rendered objects."""
    sat_vals = values["satellite"]
    dep = find(docs, "Deployment", "-satellite")
    cm = find(docs, "ConfigMap", "-satellite")
    if dep is None or cm is None:
        fail(f"{case}: no satellite Deployment/ConfigMap rendered")
        return
    spec = dep["spec"]["template"]["spec"]
    toml = cm["data"]["satellite.toml"]
    m = re.search(r"^drain_grace_secs = (\d+)$", toml, re.M)
    drain = int(m.group(1)) if m else None
    grace = spec.get("terminationGracePeriodSeconds")
    if drain is None or grace is None or grace <= drain:
        fail(f"{case}: satellite terminationGracePeriodSeconds {grace} must exceed drain_grace_secs {drain}")
    else:
        ok(f"{case}: satellite termination grace {grace}s > drain grace {drain}s; no preStop hook")
    c = spec["containers"][0]
    if c.get("lifecycle", {}).get("preStop"):
        fail(f"{case}: satellite has a preStop hook (SIGTERM alone drains)")
    probes = (c.get("livenessProbe", {}).get("httpGet", {}).get("path"), c.get("readinessProbe", {}).get("httpGet", {}).get("path"))
    if probes != ("/healthz", "/readyz"):
        fail(f"{case}: satellite probes are {probes}, want /healthz and /readyz")
    m = re.search(r"^health_port = (\d+)$", toml, re.M)
    port = next((p["containerPort"] for p in c.get("ports", []) if p.get("name") == "health"), None)
    if not m or port != int(m.group(1)):
        fail(f"{case}: satellite health port {port} differs from satellite.toml health_port")
    # The satellite binds 127.0.0.1 unless told: probes reach the pod IP.
    m = re.search(r'^health_addr = "([^"]*)"$', toml, re.M)
    if not m or m.group(1) not in ("0.0.0.0", "::"):
        fail(f"{case}: satellite.toml must bind the health port on the pod's addresses for the probes, has {m and m.group(1)}")
    network_policies(case, docs, values)
    secure_defaults(case, docs, values)
    otlp = (values.get("telemetry") or {}).get("otlpEndpoint")
    if otlp:
        pcm = find(docs, "ConfigMap", "-primary")
        if f'otlp_endpoint = "{otlp}"' in toml and pcm and pcm["data"].get("ORRERY_OTLP_ENDPOINT") == otlp:
            ok(f"{case}: primary and satellites export telemetry to {otlp}")
        else:
            fail(f"{case}: telemetry.otlpEndpoint {otlp} missing from the primary or satellite configuration")
    for kind in ("StatefulSet", "Deployment"):
        prim = find(docs, kind, "-primary")
        if prim:
            break
    want_kind = "StatefulSet" if values["primary"]["store"]["type"] == "embedded" else "Deployment"
    if prim is None or prim["kind"] != want_kind:
        fail(f"{case}: primary should be a {want_kind}")
    else:
        pc = prim["spec"]["template"]["spec"]["containers"][0]
        pp = (pc.get("livenessProbe", {}).get("httpGet", {}).get("path"), pc.get("readinessProbe", {}).get("httpGet", {}).get("path"))
        env = {e["name"]: e for e in pc.get("env", [])}
        good = pp == ("/healthz", "/readyz")
        if want_kind == "StatefulSet":
            good &= bool(prim["spec"].get("volumeClaimTemplates"))
        else:
            good &= "ORRERY_DATABASE_URL" in env and "secretKeyRef" in env["ORRERY_DATABASE_URL"].get("valueFrom", {})
        if good:
            ok(f"{case}: primary is a {want_kind} with /healthz and /readyz probes"
               + (" and a data volume" if want_kind == "StatefulSet" else " with ORRERY_DATABASE_URL from a Secret"))
        else:
            fail(f"{case}: primary {want_kind} lacks probes or its store wiring")
    hpa = find(docs, "HorizontalPodAutoscaler")
    if sat_vals["autoscaling"]["enabled"]:
        if hpa is None or "replicas" in dep["spec"]:
            fail(f"{case}: autoscaling enabled but HPA missing or Deployment still pins replicas")
        else:
            metric = hpa["spec"]["metrics"][0]["resource"]
            ok(f"{case}: HPA scales satellites {hpa['spec']['minReplicas']}-{hpa['spec']['maxReplicas']} on {metric['name']} "
               f"{metric['target']['averageUtilization']}%")
    elif hpa is not None or dep["spec"].get("replicas") != sat_vals["replicas"]:
        fail(f"{case}: without autoscaling the Deployment must pin replicas={sat_vals['replicas']} and no HPA")
    pdb = find(docs, "PodDisruptionBudget")
    if sat_vals["podDisruptionBudget"]["enabled"] and (
        pdb is None or pdb["spec"]["selector"]["matchLabels"] != dep["spec"]["selector"]["matchLabels"]
    ):
        fail(f"{case}: PodDisruptionBudget missing or not selecting the satellites")


def openssl(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True)


def secure_defaults(case: str, docs, values: dict) -> None:
    """Issue 43, attack 10: TLS on for NATS clients, leaf nodes and the API
    unless explicitly opted out; clients mount a CA, never a server key;
    the PostgreSQL store's hashing key from a Secret of its own, and in no
    other rendered object."""
    problems = []
    tls = values["tls"]
    nats_client_tls = values["natsClient"]["tls"]["enabled"]
    nats_tls = tls["enabled"] if nats_client_tls is None else nats_client_tls
    pcm = find(docs, "ConfigMap", "-primary")
    scm = find(docs, "ConfigMap", "-satellite")
    prim = find(docs, "StatefulSet", "-primary") or find(docs, "Deployment", "-primary")
    sdep = find(docs, "Deployment", "-satellite")
    toml = scm["data"]["satellite.toml"]
    pc = prim["spec"]["template"]["spec"]["containers"][0]
    schemes = {pc[p]["httpGet"].get("scheme", "HTTP") for p in ("livenessProbe", "readinessProbe")}
    url = pcm["data"]["ORRERY_NATS_URL"]
    sat = values["satellite"]
    targets = re.search(r"^targets = \[(.*)\]$", toml, re.M)
    if not sat["everyTarget"]:
        if not targets or not targets.group(1).strip():
            problems.append("satellites serve every target without satellite.everyTarget")
        users = (((values["nats"]["config"].get("merge") or {}).get("accounts") or {}).get("ORRERY") or {}).get("users") or []
        if values["nats"]["enabled"] and values["natsClient"]["auth"]["mode"] == "nkey":
            for u in users:
                if u.get("nkey") in ("<< $ORRERY_NKEY_SATELLITE >>", "<< $ORRERY_NKEY_LEAF >>"):
                    # orrery.op.P.T.* is one target's direct subjects (receipts).
                    wild = [x for x in (u.get("permissions", {}).get("subscribe", {}).get("allow") or [])
                             if x.startswith("orrery.op.") and ("*" in x or ">" in x)
                             and not (x.endswith(".*") and x.count(".") == 4 and "*" not in x[:-2] and ">" not in x)]
                    if wild:
                        problems.append(f"{u['nkey']} may subscribe to {wild} without satellite.everyTarget")
    elif case == "default":
        problems.append("the default values opt in to every-target satellites")
    if case == "default" and not (tls["enabled"] and nats_tls):
        problems.append("the default values must have TLS on (plain only as an explicit opt-out)")
    if values["nats"]["enabled"] and url.split("://")[0] != ("tls" if nats_tls else "nats"):
        problems.append(f"NATS URL {url} with TLS {nats_tls}")
    if nats_tls != ("ORRERY_TLS_CA" in pcm["data"] and 'tls_ca = "' in toml):
        problems.append(f"client TLS {nats_tls} but primary/satellite CA settings disagree")
    # Clients mount ca.crt (and their own client certificate), never a server key they do not need.
    for dep in (prim, sdep):
        for vol in dep["spec"]["template"]["spec"].get("volumes", []):
            if vol["name"] == "nats-tls":
                keys = [i["key"] for i in vol["secret"].get("items", [])]
                want = ["ca.crt"] + (["tls.crt", "tls.key"] if values["natsClient"]["tls"]["clientCert"] else [])
                if keys != want:
                    problems.append(f"{dep['metadata']['name']} mounts {keys or 'the whole Secret'} of the NATS TLS Secret, want {want}")
    if tls["enabled"]:
        if schemes != {"HTTPS"} or not pcm["data"].get("ORRERY_API_TLS_CERT") or not pcm["data"].get("ORRERY_API_TLS_KEY"):
            problems.append(f"API not on HTTPS (probes {schemes}, ORRERY_API_TLS_CERT {pcm['data'].get('ORRERY_API_TLS_CERT')})")
        if values["nats"]["enabled"]:
            for where in ("nats", "leafnodes"):
                t = (values["nats"]["config"].get(where) or {}).get("tls") or {}
                if not t.get("enabled") or t.get("secretName") != tls["natsSecretName"]:
                    problems.append(f"bundled NATS {where} TLS off or not from {tls['natsSecretName']}: {t}")
        for secret, host in ((tls["natsSecretName"], "orrery-nats"), (tls["apiSecretName"], "orrery-primary")):
            if tls["certManager"]["enabled"]:
                cert = next((d for _, d in docs if d.get("kind") == "Certificate" and d["metadata"]["name"] == secret), None)
                if cert is None or cert["spec"].get("secretName") != secret or host not in cert["spec"].get("dnsNames", []) \
                        or not cert["spec"].get("issuerRef", {}).get("name"):
                    problems.append(f"no cert-manager Certificate {secret} for {host}")
                continue
            doc = next((d for _, d in docs if d.get("kind") == "Secret" and d["metadata"]["name"] == secret), None)
            if doc is None or set(doc.get("data", {})) != {"ca.crt", "tls.crt", "tls.key"}:
                problems.append(f"no generated Secret {secret} with ca.crt, tls.crt and tls.key")
                continue
            pem = {k: base64.b64decode(v) for k, v in doc["data"].items()}
            with tempfile.TemporaryDirectory() as d:
                for k, v in pem.items():
                    Path(d, k).write_bytes(v)
                verify = openssl("verify", "-CAfile", f"{d}/ca.crt", f"{d}/tls.crt")
                san = openssl("x509", "-in", f"{d}/tls.crt", "-noout", "-ext", "subjectAltName").stdout.decode()
                key_ok = openssl("pkey", "-in", f"{d}/tls.key", "-noout").returncode == 0
            if verify.returncode != 0 or f"DNS:{host}," not in san or not key_ok:
                problems.append(f"{secret}: certificate does not verify against its ca.crt or lacks DNS:{host} ({san.strip()})")
    elif schemes != {"HTTP"} or "ORRERY_API_TLS_CERT" in pcm["data"]:
        problems.append("tls.enabled is false but the API still has TLS settings")
    if values["primary"]["store"]["type"] == "postgres":
        env_file = pcm["data"].get("ORRERY_SECRET_KEY_FILE")
        mounts = {m["name"]: m["mountPath"] for m in pc.get("volumeMounts", [])}
        vols = {v["name"]: v for v in prim["spec"]["template"]["spec"]["volumes"]}
        sk = vols.get("secret-key", {}).get("secret")
        if env_file != "/etc/orrery/secret-key/secret.key" or mounts.get("secret-key") != "/etc/orrery/secret-key" or not sk:
            problems.append(f"PostgreSQL store without its key file from a Secret (ORRERY_SECRET_KEY_FILE={env_file}, mounts {mounts})")
        else:
            own = next((d for _, d in docs if d.get("kind") == "Secret" and d["metadata"]["name"] == sk["secretName"]), None)
            want_own = not values["primary"]["store"]["postgres"]["secretKey"]["existingSecret"]
            if want_own:
                key = (own or {}).get("stringData", {}).get("secret.key", "")
                if not re.fullmatch(r"[0-9a-f]{64}\n", key):
                    problems.append(f"the chart's secret-key Secret does not hold 64 hex digits: {key!r}")
                else:
                    elsewhere = [f"{d['kind']}/{d['metadata']['name']}" for _, d in docs
                                 if d is not own and key.strip() in json.dumps(d)]
                    if elsewhere:
                        problems.append(f"the hashing key also appears in {elsewhere}")
            elif own is not None:
                problems.append("primary.store.postgres.secretKey.existingSecret is set but the chart made a key Secret too")
    if problems:
        fail(f"{case}: secure defaults: " + "; ".join(problems))
    else:
        ok(f"{case}: " + (f"TLS on: NATS clients {url.split('://')[0]}:// verifying ca.crt only, "
                          f"leaf and client listeners from {tls['natsSecretName']}, API on HTTPS "
                          f"({'cert-manager' if tls['certManager']['enabled'] else 'generated, verified with openssl'})"
                          if tls["enabled"] else "TLS explicitly opted out (tls.enabled=false): plain API and NATS")
           + (f"; satellites per target ({targets.group(1) if targets else ''})" if not sat["everyTarget"]
              else "; every-target satellites (explicit opt-in satellite.everyTarget)")
           + ("; PostgreSQL hashing key from a Secret, in no other object"
              if values["primary"]["store"]["type"] == "postgres" else ""))


def network_policies(case: str, docs, values: dict) -> None:
    """networkPolicy: the primary's API only from labelled clients, the
    satellites' health port from networkPolicy.metrics.from, the bundled
    NATS's client port only from this release's pods; probes keep working
    (named ports the containers have)."""
    np = values["networkPolicy"]
    pols = {d["metadata"]["name"]: d for _, d in docs if d.get("kind") == "NetworkPolicy"}
    if not np["enabled"]:
        if pols:
            fail(f"{case}: networkPolicy.enabled is false but {sorted(pols)} rendered")
        else:
            ok(f"{case}: networkPolicy disabled, none rendered")
        return
    prim = next((d for n, d in pols.items() if n.endswith("-primary")), None)
    sat = next((d for n, d in pols.items() if n.endswith("-satellite")), None)
    pdep = find(docs, "StatefulSet", "-primary") or find(docs, "Deployment", "-primary")
    sdep = find(docs, "Deployment", "-satellite")
    problems = []
    if prim is None or sat is None:
        fail(f"{case}: networkPolicy enabled but primary/satellite policies missing: {sorted(pols)}")
        return
    for pol, dep, port in ((prim, pdep, "http"), (sat, sdep, "health")):
        sel = pol["spec"]["podSelector"]["matchLabels"]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        if any(labels.get(k) != v for k, v in sel.items()):
            problems.append(f"{pol['metadata']['name']} does not select {dep['metadata']['name']}'s pods")
        if pol["spec"].get("policyTypes") != ["Ingress"]:
            problems.append(f"{pol['metadata']['name']}: policyTypes {pol['spec'].get('policyTypes')} (ingress only)")
        rules = pol["spec"].get("ingress", [])
        if len(rules) != 1 or [p.get("port") for p in rules[0].get("ports", [])] != [port]:
            problems.append(f"{pol['metadata']['name']}: want one rule on port {port}, got {rules}")
        cports = [p.get("name") for p in dep["spec"]["template"]["spec"]["containers"][0].get("ports", [])]
        if port not in cports:
            problems.append(f"{dep['metadata']['name']} has no port named {port}")
    if not problems:
        src = prim["spec"]["ingress"][0]["from"]
        first = src[0]
        if first.get("podSelector", {}).get("matchLabels") != np["api"]["clientPodLabels"]:
            problems.append(f"primary API open to {src}, want pods labelled {np['api']['clientPodLabels']}")
        if any(not peer for peer in src) or any(peer.get("ipBlock", {}).get("cidr") == "0.0.0.0/0" for peer in src):
            problems.append(f"primary API open to everyone: {src}")
        if ("namespaceSelector" in first) != isinstance(np["api"]["clientNamespaceSelector"], dict):
            problems.append(f"primary API clients' namespaceSelector {first.get('namespaceSelector')} "
                            f"!= networkPolicy.api.clientNamespaceSelector {np['api']['clientNamespaceSelector']}")
        if sat["spec"]["ingress"][0].get("from") != np["metrics"]["from"]:
            problems.append(f"satellite health port open to {sat['spec']['ingress'][0].get('from')}, want {np['metrics']['from']}")
    natspol = next((d for n, d in pols.items() if n.endswith("-nats")), None)
    if values["nats"]["enabled"] and np["nats"]["enabled"]:
        if natspol is None:
            problems.append("bundled NATS without its NetworkPolicy")
        else:
            rules = natspol["spec"]["ingress"]
            client = next((r for r in rules if [p["port"] for p in r.get("ports", [])] == [4222]), None)
            want = {"app.kubernetes.io/name": sdep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"],
                    "app.kubernetes.io/instance": "orrery"}
            if client is None or [f.get("podSelector", {}).get("matchLabels") for f in client.get("from", [])] != [want]:
                problems.append(f"NATS client port not limited to the release's Orrery pods: {client}")
            for dep in (pdep, sdep):
                labels = dep["spec"]["template"]["metadata"]["labels"]
                if any(labels.get(k) != v for k, v in want.items()):
                    problems.append(f"{dep['metadata']['name']}'s pods would not match the NATS client rule")
    elif natspol is not None:
        problems.append("a NATS NetworkPolicy without the bundled NATS")
    if problems:
        fail(f"{case}: network policies: " + "; ".join(problems))
    else:
        ok(f"{case}: NetworkPolicies: API (port http) only from pods labelled {np['api']['clientPodLabels']}"
           + (f" in namespaces {np['api']['clientNamespaceSelector']}" if np['api']['clientNamespaceSelector'] is not None else " (release namespace)")
           + f"; satellite health port from {np['metrics']['from']}"
           + ("; NATS 4222 only from this release's pods" if natspol else "")
           + "; probes on the same named ports")


CASES_OK = {
    # Plain connections only as an explicit opt-out.
    "postgres-existing-secret-no-auth-no-tls": {
        "nats": {"enabled": False},
        "tls": {"enabled": False},
        "natsClient": {"url": "nats://nats-a:4222,nats://nats-b:4222", "auth": {"mode": "none"}, "tls": {"enabled": False}},
        "primary": {"store": {"type": "postgres", "postgres": {"existingSecret": "pg", "existingSecretKey": "dsn",
                                                               "secretKey": {"existingSecret": "pg-key"}}}},
        "satellite": {"podDisruptionBudget": {"enabled": False}, "extraConfig": {"note": "x", "n": 3, "flag": True, "list": ["a", "b"]}},
        "serviceAccount": {"create": False, "name": "orrery-runner"},
    },
    "no-network-policy": {"networkPolicy": {"enabled": False}},
    "cert-manager": {"tls": {"certManager": {"enabled": True}}},
    # The explicit opt-in: one identity, every target of local.
    "every-target-opt-in": {
        "satellite": {"targets": [], "everyTarget": True},
        "nats": {"config": {"merge": {"accounts": {"ORRERY": {"jetstream": "enabled", "users": [
            {"nkey": "<< $ORRERY_NKEY_SATELLITE >>", "permissions": {"subscribe": {"allow": ["orrery.op.local.*", "orrery.describe.local.*", "orrery.describe.local"]}}},
        ]}}}}},
    },
    "cert-manager-issuer-own-nats-tls": {
        "tls": {"certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
        "nats": {"enabled": False},
        "natsClient": {"url": "tls://nats.corp:4222", "tls": {"secretName": "corp-nats-ca"}},
        "primary": {"store": {"type": "postgres", "postgres": {"url": "postgres://o:p@db:5432/o"}}},
    },
    "creds-tls-hub": {
        "natsClient": {"auth": {"mode": "creds", "secretName": "site-creds"},
                       "tls": {"enabled": True, "secretName": "nats-ca", "clientCert": False}},
        "hub": {"existingSecret": "publishers"},
        "satellite": {"replicas": 5, "targets": ["lab"]},
    },
}

CASES_REFUSED = {
    "grace-shorter-than-drain": ({"satellite": {"drainGraceSeconds": 60, "terminationGracePeriodSeconds": 60}}, "terminationGracePeriodSeconds"),
    "postgres-without-url": ({"primary": {"store": {"type": "postgres"}}}, "postgres"),
    "unknown-auth-mode": ({"natsClient": {"auth": {"mode": "password"}}}, "natsClient.auth.mode"),
    "no-nats-no-url": ({"nats": {"enabled": False}}, "natsClient.url"),
    "create-secret-without-seeds": ({"natsClient": {"auth": {"createSecret": True}}}, "createSecret"),
    # TLS is only turned off explicitly and everywhere at once.
    "tls-on-but-bundled-nats-plain": ({"nats": {"config": {"nats": {"tls": {"enabled": False}}}}},
                                      "nats.config.nats.tls.enabled"),
    "tls-on-but-leaf-connections-plain": ({"nats": {"config": {"leafnodes": {"tls": {"enabled": False}}}}},
                                          "nats.config.leafnodes.tls.enabled"),
    "tls-off-but-bundled-nats-on": ({"tls": {"enabled": False}}, "nats.config.nats.tls.enabled"),
    "clients-plain-to-a-tls-nats": ({"natsClient": {"tls": {"enabled": False}}}, "natsClient.tls.enabled is false"),
    "own-nats-tls-without-its-ca": ({"nats": {"enabled": False}, "natsClient": {"url": "tls://n:4222"}},
                                    "natsClient.tls.secretName"),
    # The default NATS satellite user serves orrery-plugin-local only.
    "satellite-permissions-miss-a-plugin": (
        {"satellite": {"plugins": ["/usr/local/lib/orrery/plugins/orrery-plugin-local",
                                   "/usr/local/lib/orrery/plugins/orrery-plugin-testbed"]}},
        "may not subscribe to orrery.op.testbed.default"),
    # One identity for every target only as an explicit opt-in.
    "every-target-satellites-without-opt-in": ({"satellite": {"targets": []}}, "satellite.everyTarget=true"),
    "wildcard-satellite-user-without-opt-in": (
        {"nats": {"config": {"merge": {"accounts": {"ORRERY": {"jetstream": "enabled", "users": [
            {"nkey": "<< $ORRERY_NKEY_SATELLITE >>", "permissions": {"subscribe": {"allow": ["orrery.op.local.*", "orrery.describe.local"]}}},
        ]}}}}}}, "may subscribe to orrery.op.local.*"),
    "wildcard-leaf-user-without-opt-in": (
        {"nats": {"config": {"merge": {"accounts": {"ORRERY": {"jetstream": "enabled", "users": [
            {"nkey": "<< $ORRERY_NKEY_SATELLITE >>", "permissions": {"subscribe": {"allow": ["orrery.op.local.default", "orrery.describe.local.default"]}}},
            {"nkey": "<< $ORRERY_NKEY_LEAF >>", "permissions": {"subscribe": {"allow": ["orrery.op.>"]}}},
        ]}}}}}}, "may subscribe to orrery.op.>"),
    # The plugin-wide describe subject is every target's too (issue 43, item 2).
    "plugin-wide-describe-without-opt-in": (
        {"nats": {"config": {"merge": {"accounts": {"ORRERY": {"jetstream": "enabled", "users": [
            {"nkey": "<< $ORRERY_NKEY_SATELLITE >>", "permissions": {"subscribe": {"allow": ["orrery.op.local.default", "orrery.describe.local.default", "orrery.describe.local"]}}},
        ]}}}}}}, "may subscribe to orrery.describe.local,"),
}


def accounts_conf(values: dict) -> str:
    merge = values["nats"]["config"]["merge"]
    text = json.dumps(merge, indent=2)
    # The NATS chart's << ... >> marks a bare token (here a variable reference).
    text = re.sub(r'"<< (.*?) >>"', r"\1", text)
    body = text.strip()[1:-1]  # the keys of the top-level object
    return ("# Generated by deploy/test/chart_check.py from helm/orrery/values.yaml\n"
            "# (nats.config.merge), for the NATS permission test.\n" + body + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chart", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--accounts-out", type=Path)
    ap.add_argument("--extra-values", type=Path, help="one more value set to render and validate (gen-nkeys.py --helm-values)")
    ap.add_argument("--extra-accounts-out", type=Path, help="the NATS accounts of the chart with --extra-values")
    args = ap.parse_args()
    chart_dir = args.chart.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"  helm SDK {helm.helm_sdk_version()} (helm-python-sdk {helm.__version__}), "
          f"kubernetes-validate {kubernetes_validate.version.__version__}", flush=True)

    with helm.Chart.load(str(chart_dir)) as chart:
        defaults = chart.values
        deps = chart.metadata.get("dependencies", [])
        nats_dep = next((d for d in deps if d.get("name") == "nats"), None)
        if nats_dep and nats_dep.get("condition") == "nats.enabled" and "nats-io.github.io/k8s/helm/charts" in nats_dep.get("repository", ""):
            ok(f"Chart.yaml depends on the official NATS chart {nats_dep['version']} (condition nats.enabled)")
        else:
            fail(f"Chart.yaml lacks the optional nats dependency: {deps}")

        large_file = chart_dir / "ci" / "values-large.yaml"
        large = yaml.safe_load(large_file.read_text())
        cases: dict[str, dict] = {"default": {}, "values-large": large, **CASES_OK}
        extra = None
        if args.extra_values:
            extra = yaml.safe_load(args.extra_values.read_text())
            cases[f"extra:{args.extra_values.name}"] = extra
        for case, over in cases.items():
            lint(chart_dir, case, over or None)
            try:
                rendered = render(chart, over or None)
            except helm.HelmError as e:
                fail(f"{case}: render failed: {e}")
                continue
            docs = documents(rendered)
            validate(case, docs, args.out)
            promises(case, docs, deep_merge(defaults, over))
            if case == "values-large":
                dep = find(docs, "Deployment", "-satellite")
                hpa = find(docs, "HorizontalPodAutoscaler")
                pg = find(docs, "Secret", "-postgres")
                if hpa and hpa["spec"]["minReplicas"] == 10 and pg and find(docs, "Deployment", "-primary"):
                    ok("values-large: 10 satellites minimum, autoscaling, PostgreSQL (primary Deployment + URL Secret)")
                else:
                    fail("values-large: expected 10 satellites, an HPA and PostgreSQL")

        for case, (over, needle) in CASES_REFUSED.items():
            try:
                render(chart, over)
                fail(f"refuses {case}: it rendered")
            except helm.HelmError as e:
                if needle in str(e):
                    ok(f"refuses {case}: {str(e).splitlines()[-1][:140]}")
                else:
                    fail(f"refuses {case}: failed for another reason: {e}")

    if args.accounts_out:
        args.accounts_out.write_text(accounts_conf(defaults))
        ok(f"wrote the chart's NATS accounts to {args.accounts_out}")
    if args.extra_accounts_out and extra is not None:
        args.extra_accounts_out.write_text(accounts_conf(deep_merge(defaults, extra)))
        ok(f"wrote the NATS accounts of the chart with {args.extra_values.name} to {args.extra_accounts_out}")

    print(f"  chart: {passes} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
