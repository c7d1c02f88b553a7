#!/usr/bin/env python3
"""Prove deploy/nats's subject permissions against a real nats-server.

Run by deploy/test/check.sh (with nats-py and nkeys installed in its venv):

  nats_permissions.py core --nats-server BIN --keys DIR --accounts FILE
      Starts nats-server on a random loopback port with a small wrapper
      config that includes FILE (deploy/nats/accounts.conf, unmodified),
      plus JetStream, and checks what each identity may and may not do.

  nats_permissions.py leaf --nats-server BIN --keys DIR --core CONF --leaf CONF
      Starts the single-server core (deploy/nats/single/nats.conf) and a
      leaf node (deploy/nats/leaf/leaf.conf), both unmodified, on their
      standard ports. check.sh runs this inside a private network namespace
      (unshare --net --mount) where nats-a/b/c resolve to 127.0.0.1 and a
      tmpfs covers /var/lib (the core's JetStream store); only the leaf's own
      client and monitoring ports are overridden on the command line (both
      servers share one loopback there). A satellite behind the leaf serves a request from the
      primary on the core, and the leaf enforces the satellite permissions.

  nats_permissions.py satellite --nats-server BIN --keys DIR --accounts FILE
      --satellite-bin target/debug/orrery-satellite --plugin PLUGIN
      The real satellite with satellite credentials: it registers its NATS
      service, answers $SRV.INFO, drains and exits 0 on SIGTERM, and the
      server logs no permission violation.

KEYS holds the output of deploy/nats/gen-nkeys.py (the seeds the clients
use); the server gets the public keys through the ORRERY_NKEY_* and
ORRERY_LEAF_NKEY_SEED variables read from KEYS/nkeys.env and KEYS/leaf.env.
Every check prints one line; the exit status is non-zero if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
from nats.errors import NoRespondersError, TimeoutError as NatsTimeout

TIMEOUT = 5.0
results: list[tuple[bool, str]] = []


def check(ok: bool, what: str, detail: str = "") -> None:
    results.append((ok, what))
    line = f"  {'ok  ' if ok else 'FAIL'} {what}"
    if detail:
        line += f"  ({detail})"
    print(line, flush=True)


def load_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


class Server:
    """A nats-server child process; its client URL from its ports file."""

    def __init__(self, binary: str, conf: Path, env: dict[str, str], args: list[str], name: str, workdir: Path):
        self.name = name
        self.ports_dir = Path(tempfile.mkdtemp(dir=workdir, prefix=f"{name}-ports-"))
        self.log = workdir / f"{name}.log"
        cmd = [binary, "-c", str(conf), "--ports_file_dir", str(self.ports_dir), "-l", str(self.log), *args]
        if os.environ.get("ORRERY_NATS_TRACE"):
            cmd.append("-DV")
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = self._wait_url()

    def _wait_url(self) -> str:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                log = self.log.read_text() if self.log.exists() else ""
                raise SystemExit(f"{self.name}: nats-server exited {self.proc.returncode}: {err}{log}")
            files = list(self.ports_dir.glob("*.ports"))
            if files:
                try:
                    ports = json.loads(files[0].read_text())
                    return ports["nats"][0]
                except (ValueError, KeyError, IndexError):
                    pass
            time.sleep(0.05)
        raise SystemExit(f"{self.name}: nats-server wrote no ports file in 15 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-int(os.environ.get("ORRERY_NATS_LOG_LINES", "30")):]) if self.log.exists() else ""


class Client:
    """A nats-py connection that records the server's -ERR lines."""

    def __init__(self, name: str):
        self.name = name
        self.errors: list[str] = []
        self.nc = None

    async def connect(self, url: str, seed: Path | None) -> "Client":
        async def on_error(e: Exception) -> None:
            self.errors.append(str(e))

        opts = dict(servers=[url], error_cb=on_error, allow_reconnect=False, connect_timeout=TIMEOUT, name=self.name)
        if seed is not None:
            opts["nkeys_seed"] = str(seed)
        self.nc = await nats.connect(**opts)
        return self

    async def wait_error(self, fragment: str, timeout: float = TIMEOUT) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.errors:
                if fragment.lower() in e.lower():
                    return e
            await asyncio.sleep(0.02)
        return None

    async def close(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()


async def settle(c: Client) -> None:
    """Make sure what the client wrote has reached the server.

    nats-py's flush() writes its PING ahead of still-buffered commands, so
    one flush is not a barrier; a second one, after the flusher task ran, is.
    """
    await c.nc.flush(TIMEOUT)
    await asyncio.sleep(0.05)
    await c.nc.flush(TIMEOUT)


async def request_until_served(c: Client, subject: str, payload: bytes, deadline_s: float = 10.0):
    """A request, retried while nobody serves it yet; the reply or the last error."""
    deadline = time.monotonic() + deadline_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            return await c.nc.request(subject, payload, timeout=1)
        except (NoRespondersError, NatsTimeout) as e:
            last = e
            await asyncio.sleep(0.1)
    raise last if last else NatsTimeout()


async def expect_refused_publish(c: Client, subject: str, what: str) -> None:
    await c.nc.publish(subject, b"x")
    await settle(c)
    err = await c.wait_error(f'Publish to "{subject}"')
    check(err is not None, what, err or "no permissions violation reported")


async def expect_refused_subscribe(c: Client, subject: str, what: str) -> None:
    await c.nc.subscribe(subject)
    await settle(c)
    err = await c.wait_error(f'Subscription to "{subject}"')
    check(err is not None, what, err or "no permissions violation reported")


async def serve_echo(c: Client, subject: str, queue: str = "") -> None:
    async def handler(msg) -> None:
        await msg.respond(b"served by " + c.name.encode() + b": " + msg.data)

    await c.nc.subscribe(subject, queue=queue, cb=handler)
    await settle(c)


async def run_core(args: argparse.Namespace) -> None:
    keys = Path(args.keys)
    env = load_env(keys / "nkeys.env") if (keys / "nkeys.env").exists() else {}
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-core-"))
    accounts = Path(args.accounts).resolve()
    conf = work / "core.conf"
    # nats-server resolves includes relative to the including file only.
    conf.write_text(
        "# test wrapper: a random loopback port, JetStream, the shipped accounts\n"
        "listen: 127.0.0.1:-1\n"
        f'jetstream {{ store_dir: "{work / "js"}" }}\n'
        f'include "{os.path.relpath(accounts, work)}"\n'
    )
    server = Server(args.nats_server, conf, env, [], "core", work)
    print(f"  nats-server with {accounts} at {server.url}", flush=True)
    clients: list[Client] = []
    try:
        # No credentials: refused.
        anon = Client("anonymous")
        try:
            await anon.connect(server.url, None)
            clients.append(anon)
            check(False, "a client without credentials is refused", "it connected")
        except Exception as e:  # noqa: BLE001 - the refusal is the expected outcome
            said = [str(e), *anon.errors]
            why = next((m for m in said if "authorization" in m.lower()), None)
            check(why is not None, "a client without credentials is refused", why or f"refused for another reason: {said}")

        primary = await Client("primary").connect(server.url, keys / "primary.nk")
        sat = await Client("satellite").connect(server.url, keys / f"{args.satellite}.nk")
        sat2 = await Client("satellite-2").connect(server.url, keys / f"{args.satellite}.nk")
        clients += [primary, sat, sat2]
        check(True, "primary and satellite authenticate with their nkeys")

        # A watcher with satellite rights sees every orrery.op message.
        seen: list[bytes] = []

        async def watch(msg) -> None:
            seen.append(msg.data)

        await sat2.nc.subscribe("orrery.op.>", cb=watch)
        await settle(sat2)

        deadline = time.monotonic() + TIMEOUT
        while b"from-primary" not in seen and time.monotonic() < deadline:
            await primary.nc.publish("orrery.op.x.y", b"from-primary")
            await settle(primary)
            await asyncio.sleep(0.1)
        check(b"from-primary" in seen and not primary.errors, "primary may publish to orrery.op.x.y",
              "delivered to a satellite" if b"from-primary" in seen else f"not delivered; errors {primary.errors}")

        await expect_refused_publish(sat, "orrery.op.x.y", "satellite may NOT publish to orrery.op.x.y")
        await asyncio.sleep(0.2)
        check(b"x" not in seen, "the refused operation request reached no subscriber")

        # Request/reply: the satellite serves in its queue group, replies via allow_responses.
        await serve_echo(sat, "orrery.op.local.default", queue="orrery-local")
        try:
            reply = await request_until_served(primary, "orrery.op.local.default", b"op")
            check(reply.data.startswith(b"served by satellite"), "primary's request is served and answered by a satellite",
                  reply.data.decode(errors="replace"))
        except Exception as e:  # noqa: BLE001
            check(False, "primary's request is served and answered by a satellite", repr(e))

        # Service protocol: satellites answer $SRV requests, the primary sends them.
        await serve_echo(sat, "$SRV.PING.orrery-satellite")
        try:
            reply = await request_until_served(primary, "$SRV.PING.orrery-satellite", b"")
            check(True, "primary may send $SRV.PING; a satellite answers it", reply.data.decode(errors="replace"))
        except Exception as e:  # noqa: BLE001
            check(False, "primary may send $SRV.PING; a satellite answers it", repr(e))

        await expect_refused_publish(sat, "_INBOX.forged", "satellite may NOT publish to an inbox it got no request from")
        await expect_refused_subscribe(sat, "_INBOX.>", "satellite may NOT read replies meant for the primary (_INBOX.>)")
        await expect_refused_publish(sat, "$JS.API.INFO", "satellite may NOT use JetStream ($JS.API.INFO)")
        await expect_refused_publish(sat, "$SRV.PING", "satellite may NOT send $SRV requests (the primary's control)")
        await expect_refused_subscribe(primary, "orrery.op.>", "primary may NOT subscribe to orrery.op.> (steal work)")
        await expect_refused_subscribe(primary, "$SRV.>", "primary may NOT answer $SRV requests (impersonate satellites)")

        try:
            info = await request_until_served(primary, "$JS.API.INFO", b"")
            body = json.loads(info.data)
            check("error" not in body, "primary may use JetStream ($JS.API.INFO)", f"account memory {body.get('memory')}")
        except Exception as e:  # noqa: BLE001
            check(False, "primary may use JetStream ($JS.API.INFO)", repr(e))
    finally:
        for c in clients:
            await c.close()
        server.stop()
        if any(not ok for ok, _ in results):
            print("--- core server log (tail) ---\n" + server.log_tail())
        shutil.rmtree(work, ignore_errors=True)


async def run_leaf(args: argparse.Namespace) -> None:
    keys = Path(args.keys)
    env = {**load_env(keys / "nkeys.env"), **load_env(keys / "leaf.env")}
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-leaf-"))
    core = Server(args.nats_server, Path(args.core), env, [], "core", work)
    leaf = Server(args.nats_server, Path(args.leaf), env, ["-p", "4223", "-m", "8223"], "leaf", work)
    print(f"  core (single/nats.conf) at {core.url}, leaf (leaf/leaf.conf) at {leaf.url}", flush=True)
    clients: list[Client] = []
    try:
        primary = await Client("primary").connect(core.url, keys / "primary.nk")
        sat = await Client("satellite-behind-leaf").connect(leaf.url, keys / "satellite.nk")
        clients += [primary, sat]
        await serve_echo(sat, "orrery.op.local.site-b", queue="orrery-local")
        await serve_echo(sat, "$SRV.PING.orrery-satellite")
        # The leaf link comes up and propagates interest asynchronously.
        try:
            reply = await request_until_served(primary, "orrery.op.local.site-b", b"op", 15)
            ok, detail = reply.data.startswith(b"served by satellite-behind-leaf"), reply.data.decode(errors="replace")
        except Exception as e:  # noqa: BLE001
            ok, detail = False, repr(e)
        check(ok, "a request from the primary on the core is served by a satellite behind the leaf", detail)
        try:
            reply = await request_until_served(primary, "$SRV.PING.orrery-satellite", b"")
            check(True, "$SRV.PING reaches a satellite behind the leaf", reply.data.decode(errors="replace"))
        except Exception as e:  # noqa: BLE001
            check(False, "$SRV.PING reaches a satellite behind the leaf", repr(e))
        await expect_refused_publish(sat, "orrery.op.x.y", "the leaf refuses a satellite's operation request (orrery.op.x.y)")
        await expect_refused_subscribe(sat, "_INBOX.>", "the leaf refuses a satellite reading _INBOX.>")

        # The core limits what a leaf may send in: even a primary identity
        # connected at a remote leaf cannot inject operations into the core.
        core_sat = await Client("satellite-on-core").connect(core.url, keys / "satellite.nk")
        remote_primary = await Client("primary-behind-leaf").connect(leaf.url, keys / "primary.nk")
        clients += [core_sat, remote_primary]
        got: list[bytes] = []

        async def watch(msg) -> None:
            got.append(msg.data)

        await core_sat.nc.subscribe("orrery.op.inject.core", cb=watch)
        await settle(core_sat)
        await asyncio.sleep(0.5)  # let the interest reach the leaf
        await remote_primary.nc.publish("orrery.op.inject.core", b"injected")
        await settle(remote_primary)
        await asyncio.sleep(0.5)
        check(not got, "the core refuses operation requests arriving from a leaf (leaf permissions)",
              f"delivered: {got}" if got else "")
    finally:
        for c in clients:
            await c.close()
        leaf.stop()
        core.stop()
        if any(not ok for ok, _ in results):
            print("--- core log (tail) ---\n" + core.log_tail())
            print("--- leaf log (tail) ---\n" + leaf.log_tail())
        shutil.rmtree(work, ignore_errors=True)


async def run_satellite(args: argparse.Namespace) -> None:
    """The real orrery-satellite, with satellite credentials, under the policy."""
    keys = Path(args.keys)
    env = load_env(keys / "nkeys.env")
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-sat-"))
    accounts = Path(args.accounts).resolve()
    conf = work / "core.conf"
    conf.write_text(
        "listen: 127.0.0.1:-1\n"
        f'jetstream {{ store_dir: "{work / "js"}" }}\n'
        f'include "{os.path.relpath(accounts, work)}"\n'
    )
    server = Server(args.nats_server, conf, env, [], "core", work)
    sat_log = work / "satellite.log"
    sat_env = {**os.environ, "ORRERY_SATELLITE_NATS_URL": server.url,
               "ORRERY_SATELLITE_NATS_NKEY": str(keys / "satellite.nk")}
    with open(sat_log, "wb") as log:
        sat = subprocess.Popen([args.satellite_bin, "--plugin", args.plugin, "--id", "check-satellite"],
                               env=sat_env, stdout=log, stderr=subprocess.STDOUT)
    print(f"  nats-server with {accounts} at {server.url}; {args.satellite_bin} --plugin {args.plugin}", flush=True)
    clients: list[Client] = []
    try:
        primary = await Client("primary").connect(server.url, keys / "primary.nk")
        clients.append(primary)
        try:
            reply = await request_until_served(primary, "$SRV.INFO.orrery-satellite", b"", 20)
            info = json.loads(reply.data)
            subjects = [e.get("subject", "") for e in info.get("endpoints", [])]
            check(any(s.startswith("orrery.op.") for s in subjects),
                  "the real satellite, with satellite credentials, registers and answers $SRV.INFO",
                  f"id {info.get('id')}, endpoints {subjects}")
        except Exception as e:  # noqa: BLE001
            check(False, "the real satellite, with satellite credentials, registers and answers $SRV.INFO", repr(e))
        try:
            # Not an Envelope: the relay answers it with an error on the
            # plugin's behalf, which proves the reply path (allow_responses).
            reply = await request_until_served(primary, "orrery.op.local.default", b"not-msgpack", 10)
            check(len(reply.data) > 0, "an operation request is answered by the real satellite (its reply is allowed)",
                  f"{len(reply.data)}-byte reply")
        except Exception as e:  # noqa: BLE001
            check(False, "an operation request is answered by the real satellite (its reply is allowed)", repr(e))
        sat.terminate()
        try:
            code = sat.wait(60)
            check(code == 0, "SIGTERM drains it and it exits 0 under the policy", f"exit {code}")
        except subprocess.TimeoutExpired:
            check(False, "SIGTERM drains it and it exits 0 under the policy", "still running after 60 s")
        server.stop()
        log_text = server.log.read_text() if server.log.exists() else ""
        violations = [line for line in log_text.splitlines() if "Violation" in line]
        check(not violations, "the satellite needed nothing the policy refuses (no violations in the server log)",
              "; ".join(violations[:3]))
    finally:
        for c in clients:
            await c.close()
        if sat.poll() is None:
            sat.kill()
            sat.wait()
        server.stop()
        if any(not ok for ok, _ in results):
            print("--- satellite log (tail) ---\n" + "\n".join(sat_log.read_text(errors="replace").splitlines()[-30:]))
            print("--- server log (tail) ---\n" + server.log_tail())
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("core")
    c.add_argument("--accounts", required=True)
    c.add_argument("--satellite", default="satellite", help="the satellite identity (KEYS/NAME.nk)")
    lf = sub.add_parser("leaf")
    lf.add_argument("--core", required=True)
    lf.add_argument("--leaf", required=True)
    st = sub.add_parser("satellite")
    st.add_argument("--accounts", required=True)
    st.add_argument("--satellite-bin", required=True)
    st.add_argument("--plugin", required=True)
    for s in (c, lf, st):
        s.add_argument("--nats-server", required=True)
        s.add_argument("--keys", required=True)
    args = p.parse_args()
    runner = {"core": run_core, "leaf": run_leaf, "satellite": run_satellite}[args.mode]
    asyncio.run(runner(args))
    failed = sum(1 for ok, _ in results if not ok)
    print(f"  nats permissions ({args.mode}): {len(results) - failed} passed, {failed} failed", flush=True)
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
