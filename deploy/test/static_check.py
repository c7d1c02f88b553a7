#!/usr/bin/env python3
"""Consistency checks of deploy/ that need no running service.

Run by deploy/test/check.sh in its venv:

  static_check.py --root REPO

- Dockerfile: every package it builds (-p NAME) and every binary it copies
  (target/release/NAME) exists in the workspace (cargo metadata), and every
  plugin path that compose.yaml and the Helm chart's values name is one the
  image installs.
- compose.yaml: parses; has the nats, primary and satellite services; every
  file it mounts from the repository exists; the satellite's
  stop_grace_period outlasts its drain grace; the NATS config it runs exists.
- systemd units: the satellite stops with SIGTERM to the main process only
  (KillMode=mixed) and a TimeoutStopSec longer than the satellite's default
  drain grace; every unit has ExecStart and an [Install] section.
"""

from __future__ import annotations

import argparse
import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

DEFAULT_DRAIN_GRACE_SECS = 30  # orrery-satellite --help: --drain-grace-secs (default 30)
failures: list[str] = []
passes = 0


def ok(msg: str) -> None:
    global passes
    passes += 1
    print(f"  ok   {msg}", flush=True)


def fail(msg: str) -> None:
    failures.append(msg)
    print(f"  FAIL {msg}", flush=True)


def seconds(value) -> int:
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(value).strip())
    if not m or not any(m.groups()):
        raise ValueError(f"unsupported duration {value!r}")
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def image_plugins(dockerfile: str) -> set[str]:
    """Plugin paths the image installs."""
    dest = re.search(r"COPY --from=build /out/plugins/ (\S+)", dockerfile)
    names = re.findall(r"target/release/(orrery-plugin-[\w-]+)", dockerfile)
    if not dest:
        return set()
    base = dest.group(1).rstrip("/")
    return {f"{base}/{n}" for n in names}


def check_dockerfile(root: Path) -> set[str]:
    text = (root / "deploy/Dockerfile").read_text()
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=root, check=True, capture_output=True, text=True).stdout)
    packages = {p["name"] for p in meta["packages"]}
    bins = {t["name"] for p in meta["packages"] for t in p["targets"] if "bin" in t["kind"]}
    wanted_pkgs = set(re.findall(r"\s-p ([A-Za-z][\w-]*)", text))
    wanted_bins = set(re.findall(r"target/release/([\w-]+)", text))
    missing = (wanted_pkgs - packages) | (wanted_bins - bins)
    if missing:
        fail(f"Dockerfile names packages/binaries the workspace lacks: {sorted(missing)}")
    elif not {"orrery", "orrery-satellite"} <= wanted_bins:
        fail("Dockerfile must copy both orrery and orrery-satellite")
    else:
        ok(f"Dockerfile builds {sorted(wanted_pkgs)} and installs {sorted(wanted_bins)}, all in the workspace")
    if not re.search(r"^FROM .* AS build$", text, re.M) or not re.search(r"^FROM .* AS runtime$", text, re.M):
        fail("Dockerfile is not a multi-stage build (build + runtime)")
    if "tini" not in text or "STOPSIGNAL SIGTERM" not in text:
        fail("Dockerfile should run tini as PID 1 and stop with SIGTERM")
    return image_plugins(text)


# What each long-running compose service may find in its volumes (issue 43,
# attack 10: the satellite mounted every seed and the admin token).
COMPOSE_NEEDS = {
    "nats": {"users.conf"},
    "primary": {"primary.nk", "api-tokens.toml", "ca.crt"},
    "satellite": {"satellite.nk", "ca.crt"},
}
# Volumes holding everything (seeds, the admin token) or a server key.
COMPOSE_PRIVATE = {"keys": "every seed and the admin token", "tls": "the NATS server's private key"}


def check_compose_mounts(services: dict) -> None:
    """Each service mounts only the files it needs: the `keys` service's
    command copies files into one volume per service (`cp ... /out/VOL/`),
    and no other service mounts `keys` (nor, but NATS, `tls`)."""
    keys_cmd = " ".join(services.get("keys", {}).get("command", []))
    contents: dict[str, set[str]] = {}
    for m in re.finditer(r"cp ((?:\S+ )+?)/out/([\w-]+)/(\S*)", keys_cmd):
        srcs, vol, dest = m.group(1).split(), m.group(2), m.group(3)
        contents.setdefault(vol, set()).update({dest} if dest else {Path(x).name for x in srcs})
    for name, need in COMPOSE_NEEDS.items():
        vols = [str(v).split(":")[0] for v in services[name].get("volumes", []) if not str(v).startswith(".")]
        private = [v for v in vols if v in COMPOSE_PRIVATE and not (name == "nats" and v == "tls")]
        files = set().union(*(contents.get(v, set()) for v in vols)) if vols else set()
        if private:
            fail(f"compose.yaml: {name} mounts {', '.join(f'{v} ({COMPOSE_PRIVATE[v]})' for v in private)}")
        elif files != need:
            fail(f"compose.yaml: {name} gets {sorted(files)} from its volumes, needs exactly {sorted(need)}")
        else:
            ok(f"compose.yaml: {name} mounts only {sorted(need)} (volumes {', '.join(vols)})")
    sat = services["satellite"]
    cmd = sat.get("command", [])
    targets = [cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--target"]
    spec = re.search(r"--satellite satellite=(\S+)", keys_cmd)
    pairs = spec.group(1).split(",") if spec else []
    if not targets or not pairs or any(p.split(":")[1] not in targets or p.endswith(":*") for p in pairs):
        fail(f"compose.yaml: the satellite's identity must be per-target (gen-nkeys.py --satellite "
             f"satellite=PLUGIN:TARGET,...) and it must serve those targets (--target): {pairs} / {targets}")
    else:
        ok(f"compose.yaml: the satellite's NATS identity serves only {', '.join(pairs)} (--target {' '.join(targets)})")


def check_compose(root: Path, plugins: set[str]) -> None:
    path = root / "deploy/compose.yaml"
    doc = yaml.safe_load(path.read_text())
    services = doc.get("services", {})
    if not {"nats", "primary", "satellite"} <= set(services):
        fail(f"compose.yaml needs nats, primary and satellite services, has {sorted(services)}")
        return
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0] if isinstance(vol, str) else vol.get("source", "")
            if src.startswith("."):
                if not (path.parent / src).exists():
                    fail(f"compose.yaml: service {name} mounts missing {src}")
        build = svc.get("build")
        if build and not (path.parent / build["context"] / build["dockerfile"]).exists():
            fail(f"compose.yaml: service {name} builds from a missing Dockerfile")
    sat = services["satellite"]
    drain = int(sat.get("environment", {}).get("ORRERY_SATELLITE_DRAIN_GRACE_SECS", DEFAULT_DRAIN_GRACE_SECS))
    grace = seconds(sat.get("stop_grace_period", "10s"))
    if grace <= drain:
        fail(f"compose.yaml: satellite stop_grace_period {grace}s must exceed its drain grace {drain}s")
    cmd = sat.get("command", [])
    used = {cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--plugin"}
    if not used or not used <= plugins:
        fail(f"compose.yaml: satellite plugins {sorted(used)} are not all in the image {sorted(plugins)}")
    nats_cmd = " ".join(services["nats"].get("command", []))
    conf = re.search(r"-c /(?:etc/orrery|tmp)/nats/(\S+)", nats_cmd)
    if not conf or not (root / "deploy/nats" / conf.group(1)).exists():
        fail("compose.yaml: nats does not run a configuration from deploy/nats")
    published = []
    for name, svc in services.items():
        for port in svc.get("ports", []):
            spec = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port.get('published', '')}:{port.get('target', '')}"
            published.append(f"{name} {spec}")
            if not str(spec).startswith("127.0.0.1:"):
                fail(f"compose.yaml: service {name} publishes {spec} on every interface (bind it to 127.0.0.1)")
    if any("8222" in p for p in published):
        fail("compose.yaml: NATS monitoring (8222) must not be published")
    nats_vols = services["nats"].get("volumes", [])
    if not any(str(v).split(":")[1:2] == ["/etc/orrery/nats/tls"] for v in nats_vols) or not (root / "deploy/nats/tls").is_dir():
        fail("compose.yaml: nats needs the certificates at /etc/orrery/nats/tls (a volume over deploy/nats/tls)")
    for name in ("primary", "satellite"):
        env = services[name].get("environment", {})
        if not any(k.endswith("TLS_CA") for k in env):
            fail(f"compose.yaml: {name} does not verify NATS's certificate (ORRERY_*TLS_CA)")
    check_compose_mounts(services)
    if not any(f.startswith("compose.yaml") for f in failures):
        ok(f"compose.yaml: services {sorted(services)}, mounts exist, satellite stop grace {grace}s > drain {drain}s, "
           f"plugins in the image, nats runs deploy/nats/{conf.group(1)}; published only on 127.0.0.1: {', '.join(published)}; "
           f"NATS clients verify its certificate")


def check_chart_plugins(root: Path, plugins: set[str]) -> None:
    values = yaml.safe_load((root / "helm/orrery/values.yaml").read_text())
    large = yaml.safe_load((root / "helm/orrery/ci/values-large.yaml").read_text())
    used = set(values["satellite"]["plugins"]) | set(large["satellite"]["plugins"])
    if used <= plugins:
        ok(f"helm values name plugins the image installs: {sorted(used)}")
    else:
        fail(f"helm values name plugins the image lacks: {sorted(used - plugins)}")


def unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read_string(path.read_text())
    return cp


def check_units(root: Path) -> None:
    units = sorted((root / "deploy/systemd").glob("*.service"))
    for path in units:
        u = unit(path)
        if not u.has_option("Service", "ExecStart") or not u.has_section("Install"):
            fail(f"{path.name}: needs ExecStart and an [Install] section")
    sat = unit(root / "deploy/systemd/orrery-satellite@.service")["Service"]
    timeout = seconds(sat.get("TimeoutStopSec", "90") + ("s" if sat.get("TimeoutStopSec", "").isdigit() else ""))
    if sat.get("KillSignal") != "SIGTERM" or sat.get("KillMode") != "mixed":
        fail("orrery-satellite@.service must stop with KillSignal=SIGTERM and KillMode=mixed")
    elif timeout <= DEFAULT_DRAIN_GRACE_SECS + 10:
        fail(f"orrery-satellite@.service: TimeoutStopSec {timeout}s must exceed the drain grace ({DEFAULT_DRAIN_GRACE_SECS}s) with room for plugin shutdown")
    else:
        ok(f"systemd: {len(units)} units; satellite drains on stop (SIGTERM to the main process, KillMode=mixed, "
           f"TimeoutStopSec {timeout}s > drain grace {DEFAULT_DRAIN_GRACE_SECS}s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, type=Path)
    args = ap.parse_args()
    root = args.root.resolve()
    plugins = check_dockerfile(root)
    check_compose(root, plugins)
    check_chart_plugins(root, plugins)
    check_units(root)
    print(f"  static: {passes} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
