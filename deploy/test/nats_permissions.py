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

  nats_permissions.py targets --nats-server BIN --keys DIR --accounts FILE
      --satellite site-b --own SUBJECT --other-satellite site-c --other SUBJECT
      [--legacy NAME]
      Per-target satellite keys (gen-nkeys.py --satellite NAME=PLUGIN:TARGET):
      site-b serves its own subject; it can neither subscribe to site-c's
      (nor to any wildcard over it, nor to _INBOX.>), so site-c's requests
      never reach it, nor answer them: a forged reply on the very inbox of
      a request site-c was given is refused and the primary gets site-c's
      answer only; a satellite answers a request once (allow_responses).
      With --legacy, the control: an every-target key does receive site-c's
      requests (the attack this policy prevents).

  nats_permissions.py cluster --nats-server BIN --keys DIR --dir NATSDIR --tls-ca CA
      The three cluster nodes from NATSDIR/cluster/nats-{a,b,c}.conf (a copy
      of deploy/nats whose TLS paths point at generated certificates), on
      loopback: only listen addresses, ports, route URLs (nats-X:6222 ->
      localhost:PORT) and the JetStream directory are substituted. They form
      a cluster (a message crosses it); a rogue nats-server dialling a node's
      route port without TLS, and one presenting a certificate from the
      client CA (a stolen leaf/server certificate), are refused: no route,
      and what their clients publish reaches no subscriber in the cluster.
      The control: the same rogue configuration with the route certificate
      does join and its message is delivered.

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
import logging
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
# --tls-ca: servers require TLS (the shipped configs); clients verify them with this CA.
TLS_CA: str | None = None


def tls_context():
    if TLS_CA is None:
        return None
    import ssl
    return ssl.create_default_context(cafile=TLS_CA)


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

    def __init__(self, binary: str, conf: Path, env: dict[str, str], args: list[str], name: str, workdir: Path,
                 tls: bool = False):
        self.name = name
        self.ports_dir = Path(tempfile.mkdtemp(dir=workdir, prefix=f"{name}-ports-"))
        self.log = workdir / f"{name}.log"
        cmd = [binary, "-c", str(conf), "--ports_file_dir", str(self.ports_dir), "-l", str(self.log), *args]
        if os.environ.get("ORRERY_NATS_TRACE"):
            cmd.append("-DV")
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.ports: dict = {}
        self.url = self._wait_url()
        if tls:
            self.url = self.url.replace("nats://", "tls://", 1)

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
                    self.ports = ports
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
        if url.startswith("tls://"):
            opts["tls"] = tls_context()
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

        await sat2.nc.subscribe(args.watch, cb=watch)
        await settle(sat2)

        deadline = time.monotonic() + TIMEOUT
        while b"from-primary" not in seen and time.monotonic() < deadline:
            await primary.nc.publish(args.op, b"from-primary")
            await settle(primary)
            await asyncio.sleep(0.1)
        check(b"from-primary" in seen and not primary.errors, f"primary may publish to {args.op}",
              "delivered to a satellite" if b"from-primary" in seen else f"not delivered; errors {primary.errors}")

        await expect_refused_publish(sat, args.op, f"satellite may NOT publish to {args.op}")
        await asyncio.sleep(0.2)
        check(b"x" not in seen, "the refused operation request reached no subscriber")

        # Request/reply: the satellite serves in its queue group, replies via allow_responses.
        if args.watch != "orrery.op.>":
            await expect_refused_subscribe(sat, "orrery.op.>", f"satellite may NOT subscribe to orrery.op.> (only {args.watch})")
            for other in args.refused:
                await expect_refused_subscribe(sat, other, f"satellite may NOT subscribe to {other}")
        await serve_echo(sat, args.serve, queue="orrery-local")
        try:
            reply = await request_until_served(primary, args.serve, b"op")
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


async def plain_client(url: str) -> str:
    """What a server says to a client that skips TLS: CONNECT and PING in the clear."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    said = b""
    try:
        said = await asyncio.wait_for(reader.readline(), TIMEOUT)
        writer.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        await writer.drain()
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            chunk = await asyncio.wait_for(reader.read(4096), TIMEOUT)
            if not chunk:
                break
            said += chunk
    except (asyncio.TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
    return said.decode(errors="replace")


def wrapper_conf(work: Path, accounts: Path) -> Path:
    conf = work / "core.conf"
    # nats-server resolves includes relative to the including file only.
    conf.write_text(
        "# test wrapper: a random loopback port, JetStream, the accounts under test\n"
        "listen: 127.0.0.1:-1\n"
        f'jetstream {{ store_dir: "{work / "js"}" }}\n'
        f'include "{os.path.relpath(accounts, work)}"\n'
    )
    return conf


async def run_no_shared(args: argparse.Namespace) -> None:
    """The shipped users.conf has no identity for every target: the keys an
    every-target satellite or leaf would use are refused, the primary's is
    not (issue 43, attack 10)."""
    keys = Path(args.keys)
    env = load_env(keys / "nkeys.env") if (keys / "nkeys.env").exists() else {}
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-shared-"))
    server = Server(args.nats_server, wrapper_conf(work, Path(args.accounts).resolve()), env, [], "core", work)
    try:
        primary = await Client("primary").connect(server.url, keys / "primary.nk")
        check(primary.nc.is_connected, "the primary's key connects to the shipped users.conf")
        await primary.close()
        for name in args.refused_key:
            c = Client(name)
            try:
                await c.connect(server.url, keys / f"{name}.nk")
                await c.close()
                check(False, f"the every-target {name} key is refused by the shipped users.conf", "it connected")
            except Exception as e:  # noqa: BLE001 - the refusal is the expected outcome
                said = [str(e), *c.errors]
                why = next((m for m in said if "authorization" in m.lower()), None)
                check(why is not None, f"the every-target {name} key (ORRERY_NKEY_{name.upper()} is set) "
                      "is refused by the shipped users.conf", why or f"refused for another reason: {said}")
    finally:
        server.stop()


async def run_targets(args: argparse.Namespace) -> None:
    keys = Path(args.keys)
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-targets-"))
    accounts = Path(args.accounts).resolve()
    server = Server(args.nats_server, wrapper_conf(work, accounts), {}, [], "core", work)
    print(f"  nats-server with {accounts} at {server.url}", flush=True)
    own, other = args.own, args.other
    plugin = own.split(".")[2]
    queue = f"orrery-{plugin}"
    clients: list[Client] = []
    try:
        primary = await Client("primary").connect(server.url, keys / "primary.nk")
        b = await Client(args.satellite).connect(server.url, keys / f"{args.satellite}.nk")
        c = await Client(args.other_satellite).connect(server.url, keys / f"{args.other_satellite}.nk")
        clients += [primary, b, c]

        # Each serves its own subject in the plugin's queue group.
        await serve_echo(b, own, queue=queue)
        c_requests: list = []

        async def c_serves(msg) -> None:
            c_requests.append(msg)
            if msg.reply:
                await msg.respond(b"served by " + c.name.encode())

        await c.nc.subscribe(other, queue=queue, cb=c_serves)
        await settle(c)
        check(not b.errors and not c.errors, f"{args.satellite} and {args.other_satellite} may subscribe to their own targets",
              f"{own}, {other}")
        try:
            reply = await request_until_served(primary, own, b"op")
            check(reply.data == f"served by {args.satellite}: op".encode(), f"a request on {own} is served by {args.satellite}",
                  reply.data.decode(errors="replace"))
        except Exception as e:  # noqa: BLE001
            check(False, f"a request on {own} is served by {args.satellite}", repr(e))

        # site-b tries every way of seeing site-c's work.
        stolen: list = []

        async def steal(msg) -> None:
            stolen.append(msg)
            if msg.reply:
                await b.nc.publish(msg.reply, b"forged by " + b.name.encode())

        # Describe is per target too (orrery.describe.PLUGIN.TARGET): site-b
        # answers its own target's and cannot even receive site-c's, nor
        # the plugin-wide subject only every-target identities answer.
        own_describe = "orrery.describe." + own.split(".", 2)[2]
        other_describe = "orrery.describe." + other.split(".", 2)[2]
        b.errors.clear()
        await b.nc.subscribe(own_describe)
        await settle(b)
        check(not b.errors, f"{args.satellite} may subscribe to its own target's describe subject {own_describe}",
              b.errors[-1] if b.errors else "")
        other_plugin_all = ".".join(other.split(".")[:3]) + ".*"
        for subject, q in ((other, queue), (other, ""), (other_plugin_all, ""), ("orrery.op.>", ""), ("_INBOX.>", ""),
                           ("$SRV.>", ""), (other_describe, ""), (f"orrery.describe.{plugin}", ""),
                           (f"orrery.describe.{plugin}.*", ""), ("orrery.describe.>", "")):
            b.errors.clear()
            await b.nc.subscribe(subject, queue=q, cb=steal)
            await settle(b)
            err = await b.wait_error(f'Subscription to "{subject}"')
            check(err is not None, f"{args.satellite} may NOT subscribe to {subject}" + (f" (queue {q})" if q else ""),
                  err or "no permissions violation reported")

        # site-c's requests: answered by site-c only; a forged answer from
        # site-b on the very reply subject (as if it had learnt it) is refused.
        c_requests.clear()
        inbox = primary.nc.new_inbox()
        answers: list[bytes] = []

        async def collect(msg) -> None:
            answers.append(msg.data)

        await primary.nc.subscribe(inbox, cb=collect)
        await settle(primary)

        async def c_delayed(msg) -> None:
            c_requests.append(msg)

        # A second subscriber for site-c that answers only when told, so the
        # forgery has the inbox before the real answer.
        c2 = await Client(args.other_satellite + "-slow").connect(server.url, keys / f"{args.other_satellite}.nk")
        clients.append(c2)
        await c2.nc.subscribe(other, cb=c_delayed)
        await settle(c2)
        await primary.nc.publish(other, b"op-for-c", reply=inbox)
        await settle(primary)
        deadline = time.monotonic() + TIMEOUT
        while not any(m.reply == inbox and m.data == b"op-for-c" for m in c_requests) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        got = [m for m in c_requests if m.data == b"op-for-c"]
        check(bool(got), f"a request on {other} reaches {args.other_satellite}", f"{len(got)} deliveries")
        b.errors.clear()
        await b.nc.publish(inbox, b"forged by " + b.name.encode())
        await settle(b)
        err = await b.wait_error("Publish to")
        check(err is not None, f"{args.satellite} may NOT answer {args.other_satellite}'s request, even knowing its reply subject",
              err or "no permissions violation reported")
        # site-c's slow subscriber answers now, three times: a receipt and
        # an answer pass (allow_responses max 2), the third is refused.
        c2.errors.clear()
        slow = next((m for m in got if m.reply == inbox), None)
        if slow is not None:
            await c2.nc.publish(inbox, b"answer 1 from " + c2.name.encode())
            await c2.nc.publish(inbox, b"answer 2 from " + c2.name.encode())
            await c2.nc.publish(inbox, b"answer 3 from " + c2.name.encode())
            await settle(c2)
        deadline = time.monotonic() + TIMEOUT
        while len(answers) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # anything more would have arrived by now
        forged = [a for a in answers if a.startswith(b"forged")]
        check(not forged and any(a.startswith(b"served by " + c.name.encode()) or a.startswith(b"answer 1") for a in answers),
              f"the primary receives {args.other_satellite}'s answers and no forged one", f"answers {answers}")
        check(b"answer 3 from " + c2.name.encode() not in answers,
              f"{args.other_satellite} may answer a request twice, a receipt and an answer (allow_responses max 2)",
              f"answers {answers}; {c2.errors[-1] if c2.errors else 'no violation reported'}")
        check(not stolen, f"no request for {other} was delivered to {args.satellite}", f"{len(stolen)} delivered")

        if args.legacy:
            legacy = await Client(args.legacy).connect(server.url, keys / f"{args.legacy}.nk")
            clients.append(legacy)
            seen: list[bytes] = []

            async def watch(msg) -> None:
                seen.append(msg.data)

            await legacy.nc.subscribe("orrery.op.>", cb=watch)
            await settle(legacy)
            deadline = time.monotonic() + TIMEOUT
            while b"op-for-c-2" not in seen and time.monotonic() < deadline:
                await primary.nc.publish(other, b"op-for-c-2")
                await settle(primary)
                await asyncio.sleep(0.1)
            check(b"op-for-c-2" in seen and not legacy.errors,
                  f"control: an every-target key ({args.legacy}) DOES receive {args.other_satellite}'s requests",
                  "so the refusals above are the per-target policy at work")
    finally:
        for cl in clients:
            await cl.close()
        server.stop()
        if any(not ok for ok, _ in results):
            print("--- server log (tail) ---\n" + server.log_tail())
        shutil.rmtree(work, ignore_errors=True)


def free_port() -> int:
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def routez(server: Server) -> int:
    """Routes a server has (its monitoring endpoint, /routez)."""
    import urllib.request
    url = server.ports["monitoring"][0] + "/routez"
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
        return int(json.loads(r.read()).get("num_routes", 0))


async def run_cluster(args: argparse.Namespace) -> None:
    import re
    keys = Path(args.keys)
    env = load_env(keys / "nkeys.env")
    src = Path(args.dir).resolve()
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-cluster-"))
    nodes = "abc"
    route_port = {n: free_port() for n in nodes}
    servers: dict[str, Server] = {}
    rogues: list[Server] = []
    clients: list[Client] = []
    tls_dir = src / "tls"
    try:
        for n in nodes:
            text = (src / "cluster" / f"nats-{n}.conf").read_text()
            for pattern, repl in (
                (r"^listen: 0\.0\.0\.0:4222$", "listen: 127.0.0.1:-1"),
                (r"^http: 127\.0\.0\.1:8222$", "http: 127.0.0.1:-1"),
                (r"^  listen: 0\.0\.0\.0:6222$", f"  listen: 127.0.0.1:{route_port[n]}"),
                (r"^  listen: 0\.0\.0\.0:7422$", "  listen: 127.0.0.1:-1"),
                (r'store_dir: "/var/lib/nats/jetstream"', f'store_dir: "{work / ("js-" + n)}"'),
                *((rf"nats-route://nats-{m}:6222", f"nats-route://localhost:{route_port[m]}") for m in nodes),
            ):
                text, count = re.subn(pattern, repl, text, flags=re.M)
                if count == 0:
                    raise SystemExit(f"cluster/nats-{n}.conf: nothing matches {pattern!r}: the test's substitutions are out of date")
            conf = src / "cluster" / f"test-nats-{n}.conf"  # beside the original: includes resolve the same
            conf.write_text(text)
            servers[n] = Server(args.nats_server, conf, env, [], f"nats-{n}", work, tls=True)
        print("  nodes " + ", ".join(f"nats-{n} {servers[n].url} (route port {route_port[n]})" for n in nodes), flush=True)

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(routez(servers[n]) >= 2 for n in nodes):
            await asyncio.sleep(0.1)
        counts = {n: routez(servers[n]) for n in nodes}
        check(all(c >= 2 for c in counts.values()), "the three nodes route to each other over mutually authenticated TLS",
              ", ".join(f"nats-{n}: {c} routes" for n, c in counts.items()))

        sub = await Client("satellite-on-a").connect(servers["a"].url, keys / "satellite.nk")
        pub = await Client("primary-on-c").connect(servers["c"].url, keys / "primary.nk")
        clients += [sub, pub]
        got: list[bytes] = []

        async def watch(msg) -> None:
            got.append(msg.data)

        await sub.nc.subscribe("orrery.op.>", cb=watch)
        await settle(sub)
        deadline = time.monotonic() + 10
        while b"legit" not in got and time.monotonic() < deadline:
            await pub.nc.publish("orrery.op.testbed.lab", b"legit")
            await settle(pub)
            await asyncio.sleep(0.1)
        check(b"legit" in got, "a message published on nats-c reaches a subscriber on nats-a (the cluster works)")

        def rogue_conf(name: str, tls_block: str) -> Path:
            conf = work / f"{name}.conf"
            conf.write_text(
                f"server_name: {name}\nlisten: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\n"
                # The attacker's own users in the victim's account name: what
                # its clients publish would flow into ORRERY over a route.
                "accounts: { ORRERY: { users: [ { user: rogue, password: rogue } ] } }\n"
                "cluster {\n  name: orrery\n  listen: 127.0.0.1:-1\n"
                f"  routes: [ nats-route://localhost:{route_port['a']} ]\n{tls_block}}}\n"
            )
            return conf

        def a_log() -> str:
            return servers["a"].log.read_text(errors="replace") if servers["a"].log.exists() else ""

        async def attempt(name: str, tls_block: str, payload: bytes, window: float) -> tuple[int, bool]:
            mark = len(a_log())
            server = Server(args.nats_server, rogue_conf(name, tls_block), {}, [], name, work)
            rogues.append(server)
            rc = Client(name + "-client")
            rc.nc = await nats.connect(servers=[server.url], user="rogue", password="rogue", allow_reconnect=False,
                                       connect_timeout=TIMEOUT, name=rc.name)
            clients.append(rc)
            # Publish until delivered, or until nats-a has refused the route and
            # half a second of publishing after that has gone nowhere.
            deadline = time.monotonic() + window
            refused_at = None
            while time.monotonic() < deadline and payload not in got:
                await rc.nc.publish("orrery.op.testbed.lab", payload)
                await rc.nc.flush(TIMEOUT)
                await asyncio.sleep(0.1)
                if refused_at is None and any(w in a_log()[mark:] for w in ("handshake error", "Authentication", "Authorization")):
                    refused_at = time.monotonic()
                if refused_at is not None and time.monotonic() - refused_at > 0.5:
                    break
            routes = routez(server)
            await rc.close()
            server.stop()
            refused = [ln.split(" - ", 2)[-1] for ln in a_log()[mark:].splitlines()
                       if "handshake error" in ln or "Authorization" in ln or "Authentication" in ln]
            attempt.refusal = refused[0] if refused else "nats-a logged no refusal"
            return routes, payload in got

        # Rogue 1: no TLS at all.
        routes, delivered = await attempt("rogue-plain", "", b"rogue-plain", 5)
        check(routes == 0 and not delivered and "nats-a logged" not in attempt.refusal,
              "a rogue nats-server without TLS cannot join as a route",
              f"nats-a: {attempt.refusal}; {routes} routes; its message {'WAS' if delivered else 'was not'} delivered")
        # Rogue 2: TLS with a real certificate from the client CA.
        stolen = (f'  tls {{ cert_file: "{tls_dir / "server.crt"}", key_file: "{tls_dir / "server.key"}", '
                  f'ca_file: "{tls_dir / "ca.crt"}", timeout: 2 }}\n')
        routes, delivered = await attempt("rogue-client-ca", stolen, b"rogue-client-ca", 5)
        check(routes == 0 and not delivered and "nats-a logged" not in attempt.refusal,
              "a rogue nats-server with a certificate from the client CA (server.crt) cannot join as a route",
              f"nats-a: {attempt.refusal}; {routes} routes; its message {'WAS' if delivered else 'was not'} delivered")
        # Rogue 3: a certificate from the route CA that does not name the
        # route identity (verify_and_map refuses it).
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(work / "other.key"), "-out", str(work / "other.crt"), "-days", "1",
                        "-subj", "/O=Orrery/CN=not-a-route", "-addext", "subjectAltName=DNS:localhost",
                        "-CA", str(tls_dir / "route-ca.crt"), "-CAkey", str(tls_dir / "route-ca.key")],
                       check=True, capture_output=True)
        other = (f'  tls {{ cert_file: "{work / "other.crt"}", key_file: "{work / "other.key"}", '
                 f'ca_file: "{tls_dir / "route-ca.crt"}", timeout: 2 }}\n')
        routes, delivered = await attempt("rogue-unnamed", other, b"rogue-unnamed", 5)
        check(routes == 0 and not delivered and "nats-a logged" not in attempt.refusal,
              "a nats-server with a route-CA certificate not naming orrery-route cannot join as a route",
              f"nats-a: {attempt.refusal}; {routes} routes; its message {'WAS' if delivered else 'was not'} delivered")
        # Control: the same configuration with the route certificate joins.
        good = (f'  tls {{ cert_file: "{tls_dir / "route.crt"}", key_file: "{tls_dir / "route.key"}", '
                f'ca_file: "{tls_dir / "route-ca.crt"}", timeout: 2 }}\n')
        routes, delivered = await attempt("node-with-route-cert", good, b"with-route-cert", 10)
        check(routes > 0 and delivered,
              "control: the same server WITH the route certificate joins and its message is delivered",
              f"{routes} routes; so the refusals above are the route authentication at work")
    finally:
        for c in clients:
            await c.close()
        for r in rogues:
            r.stop()
        for server in servers.values():
            server.stop()
        if any(not ok for ok, _ in results):
            for name, server in (*servers.items(), *((r.name, r) for r in rogues)):
                print(f"--- {name} log (tail) ---\n" + server.log_tail())
        for n in nodes:
            (src / "cluster" / f"test-nats-{n}.conf").unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


async def run_leaf(args: argparse.Namespace) -> None:
    keys = Path(args.keys)
    env = {**load_env(keys / "nkeys.env"), **load_env(keys / "leaf.env")}
    work = Path(tempfile.mkdtemp(prefix="orrery-nats-leaf-"))
    core = Server(args.nats_server, Path(args.core), env, [], "core", work, tls=TLS_CA is not None)
    leaf = Server(args.nats_server, Path(args.leaf), env, ["-p", "4223", "-m", "8223"], "leaf", work)
    print(f"  core (single/nats.conf) at {core.url}, leaf (leaf/leaf.conf) at {leaf.url}", flush=True)
    clients: list[Client] = []
    try:
        if TLS_CA is not None:
            said = await plain_client(core.url)
            errs = [ln for ln in said.splitlines() if ln.startswith("-ERR")]
            check("PONG" not in said and '"tls_required":true' in said,
                  "the core refuses a client that does not speak TLS (client TLS on in single/nats.conf)",
                  "INFO says tls_required; no PONG to a plaintext CONNECT/PING" + (f"; {errs[0]}" if errs else "; connection closed"))
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
    env = load_env(keys / "nkeys.env") if (keys / "nkeys.env").exists() else {}
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
               "ORRERY_SATELLITE_NATS_NKEY": str(keys / f"{args.satellite}.nk")}
    target_args = [a for t in args.target for a in ("--target", t)]
    with open(sat_log, "wb") as log:
        sat = subprocess.Popen([args.satellite_bin, "--plugin", args.plugin, "--id", "check-satellite", *target_args],
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
            target = args.target[0] if args.target else "default"
            reply = await request_until_served(primary, f"orrery.op.local.{target}", b"not-msgpack", 10)
            check(len(reply.data) > 0, "an operation request is answered by the real satellite (its reply is allowed)",
                  f"{len(reply.data)}-byte reply")
        except Exception as e:  # noqa: BLE001
            check(False, "an operation request is answered by the real satellite (its reply is allowed)", repr(e))
        try:
            # Describe on the per-target subject (the first target's, or
            # any target's for a satellite serving every target).
            target = args.target[0] if args.target else "default"
            reply = await request_until_served(primary, f"orrery.describe.local.{target}", b"", 10)
            check(len(reply.data) > 0 and reply.headers and reply.headers.get("Orrery-Satellite") == "check-satellite",
                  f"orrery.describe.local.{target} is answered by the real satellite, naming itself",
                  f"{len(reply.data)}-byte reply, headers {reply.headers}")
        except Exception as e:  # noqa: BLE001
            check(False, f"orrery.describe.local.{target} is answered by the real satellite", repr(e))
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
    c.add_argument("--op", default="orrery.op.x.y", help="an operation subject the satellite may receive")
    c.add_argument("--watch", default="orrery.op.>", help="what the watching satellite subscribes to (covers --op)")
    c.add_argument("--refused", action="append", default=[], help="a subject the satellite may not subscribe to")
    c.add_argument("--serve", default="orrery.op.local.default", help="a subject the satellite serves (queue orrery-local)")
    lf = sub.add_parser("leaf")
    lf.add_argument("--core", required=True)
    lf.add_argument("--leaf", required=True)
    cl = sub.add_parser("cluster")
    cl.add_argument("--dir", required=True, help="a copy of deploy/nats with certificates (lib.sh tls_copy)")
    tg = sub.add_parser("targets")
    tg.add_argument("--accounts", required=True)
    tg.add_argument("--satellite", required=True)
    tg.add_argument("--own", required=True)
    tg.add_argument("--other-satellite", required=True)
    tg.add_argument("--other", required=True)
    tg.add_argument("--legacy")
    ns = sub.add_parser("no-shared")
    ns.add_argument("--accounts", required=True)
    ns.add_argument("--refused-key", action="append", default=[], help="KEYS/NAME.nk must be refused")
    st = sub.add_parser("satellite")
    st.add_argument("--accounts", required=True)
    st.add_argument("--satellite-bin", required=True)
    st.add_argument("--plugin", required=True)
    st.add_argument("--satellite", default="satellite", help="the satellite identity (KEYS/NAME.nk)")
    st.add_argument("--target", action="append", default=[], help="--target of the satellite (repeatable)")
    for s in (c, lf, st, tg, cl, ns):
        s.add_argument("--nats-server", required=True)
        s.add_argument("--keys", required=True)
        s.add_argument("--tls-ca", help="the servers under test require TLS; verify them with this CA")
    args = p.parse_args()
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # "returning true from eof_received()" on TLS closes
    global TLS_CA
    TLS_CA = args.tls_ca
    runner = {"core": run_core, "leaf": run_leaf, "satellite": run_satellite, "targets": run_targets,
              "cluster": run_cluster, "no-shared": run_no_shared}[args.mode]
    asyncio.run(runner(args))
    failed = sum(1 for ok, _ in results if not ok)
    print(f"  nats permissions ({args.mode}): {len(results) - failed} passed, {failed} failed", flush=True)
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
