#!/usr/bin/python3
"""Fault cases for a Pushgate cluster (issue 46, "Faults"): three `pushgate serve` nodes, each in
a network namespace of its own as if on three hosts, on one PostgreSQL server, with device agents
and a provider load, through a database cut, a network cut, a kill -9 under load, a PostgreSQL
restart, the nodes' cluster connections terminated, and a node paused past its lease.

usage: faults.py [--pushgate PATH] [--case NAME ...] [--keep-logs DIR] [--verbose]

Needs root (namespaces, a bridge, iptables) and PostgreSQL 15's server binaries
(/usr/lib/postgresql/15/bin, or PUSHGATE_POSTGRES_BIN); not root, it fails at once. The gateways
and agents run as nobody (setpriv), PostgreSQL as postgres, as in production.

The script makes a bridge in the root namespace with the first private /24 of 10.213.0.0/16
that no address or route of the machine overlaps, the bridge address .1 (PostgreSQL listens
there), and three namespaces, each a veth into the bridge, node n1 on .11, n2 on .12, n3 on .13,
port 2197. The agents and the provider run in the root namespace and reach the nodes over the
bridge. Each case gets a new database (CREATE DATABASE) and new nodes and agents; every case
checks the same invariants on everything it sent:
  - every push answered 200 (not held: a silent push over budget waits for a wake event) is
    delivered at least once to its agent;
  - nothing is delivered again after the agent acknowledged it: the agent acks what it prints,
    and resumes with Last-Event-ID, which acknowledges everything it printed, so a notification
    (one seq) printed twice is a failure. A push stored twice (two seqs for one apns-id) comes
    from the provider sending it again after a 503 or no answer whose push was written anyway:
    counted and reported; where the node that wrote it had lost its devices (a paused node, a
    cut node) it is a fencing failure;
  - silent budgets: at most 3 silent pushes per app and device delivered on budget (immediate
    or budget), the default app burst.

Prints one line per case, `NAME: PASS|FAIL figures`, and exits 1 when a case failed, 2 when the
script could not run. Everything it made (namespaces, bridge, iptables rules, processes, files)
is removed on exit, failures and Ctrl-C included. Time limits are the contract's (issue 46); no
sleep stands in for a condition: each wait polls its condition until a deadline.
"""

import argparse
import asyncio
import atexit
import ipaddress
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "Tests", "PushgateCLITests", "python"))

try:
    import httpx
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
except ImportError as error:
    sys.stderr.write(
        f"faults.py needs httpx, h2, PyJWT and cryptography ({error}): apt-get install python3-httpx "
        "python3-h2 python3-jwt python3-cryptography; run with /usr/bin/python3\n"
    )
    sys.exit(2)

from pgcommon import alert_body, alert_headers, h2c_async_client, h2c_client, new_apns_id  # noqa: E402

POSTGRES_BIN = os.environ.get("PUSHGATE_POSTGRES_BIN", "/usr/lib/postgresql/15/bin")
TOPIC = "com.example.faults"
TEAM_ID = "FAULTTEAM1"
KEY_ID = "FAULTKEY01"
NODE_PORT = 2197
# The gateway's minimum: agents take a silence of about twice as long as a dead stream.
HEARTBEAT_SECONDS = 2
# The default app burst: silent pushes an app may receive at once on budget.
APP_BURST = 3
UNPRIVILEGED = ("nobody", "nogroup")
VERBOSE = False


def log(message):
    if VERBOSE:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} {message}\n")
        sys.stderr.flush()


class CaseFailure(Exception):
    pass


class SetupFailure(Exception):
    pass


def wait_until(what, seconds, predicate, interval=0.05):
    """Polls `predicate` until it holds; returns the seconds it took. Raises CaseFailure naming
    `what` (and the last exception the predicate raised, if any) past `seconds`."""
    start = time.monotonic()
    last_error = None
    log(f"waiting (at most {seconds} s): {what}")
    while True:
        try:
            if predicate():
                log(f"  after {time.monotonic() - start:.1f} s: {what}")
                return time.monotonic() - start
            last_error = None
        except Exception as error:  # a node not answering yet is a condition not met yet
            last_error = error
        if time.monotonic() - start > seconds:
            detail = f" (last: {type(last_error).__name__}: {last_error})" if last_error else ""
            raise CaseFailure(f"{what}: not within {seconds} s{detail}")
        time.sleep(interval)


def holds_for(what, seconds, predicate, interval=0.1):
    """Checks that `predicate` stays true for `seconds` (a state that must not change, watched
    for longer than the cluster's sweep and renewal periods); raises CaseFailure when it breaks."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not predicate():
            raise CaseFailure(f"{what}: broken after {time.monotonic() - start:.1f} s")
        time.sleep(interval)


def command(argv, timeout=90, check=True, user=None):
    """Runs argv to its end; returns its output (stdout and stderr). Output goes to a file, not a
    pipe: a server a command starts (pg_ctl) inherits it and would hold a pipe open."""
    if user:
        argv = ["/usr/sbin/runuser", "-u", user, "--"] + argv
    with tempfile.TemporaryFile() as output:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        completed = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, timeout=timeout, cwd="/tmp", env=environment
        )
        output.seek(0)
        text = output.read().decode(errors="replace")
    if check and completed.returncode != 0:
        raise SetupFailure(f"{' '.join(argv)} failed (exit {completed.returncode}): {text.strip()}")
    return text


# MARK: Cleanup


class Cleanup:
    """What to undo, newest first; run once, by the main path's finally, atexit or a signal."""

    def __init__(self):
        self.actions = []
        self.lock = threading.Lock()

    def add(self, what, action):
        with self.lock:
            self.actions.append((what, action))
        return action

    def discard(self, action):
        with self.lock:
            self.actions = [(w, a) for (w, a) in self.actions if a is not action]

    def run(self):
        while True:
            with self.lock:
                if not self.actions:
                    return
                what, action = self.actions.pop()
            try:
                action()
            except Exception as error:
                sys.stderr.write(f"cleanup: {what}: {type(error).__name__}: {error}\n")


CLEANUP = Cleanup()


def on_signal(signum, frame):
    # Unwinds the main path through its finally blocks, which undo everything.
    signal.signal(signum, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


# MARK: Processes


class Unprivileged:
    def __init__(self, binary, work):
        self.uid = pwd.getpwnam(UNPRIVILEGED[0]).pw_uid
        self.gid = int(command(["getent", "group", UNPRIVILEGED[1]]).split(":")[2])
        # A copy of our own: nobody may not reach the original (a clone under root's home), and a
        # binary replaced during the run must not change the nodes started later.
        directory = os.path.join(work, "bin")
        os.makedirs(directory, mode=0o755)
        self.binary = os.path.join(directory, "pushgate")
        shutil.copyfile(binary, self.binary)
        os.chmod(self.binary, 0o755)

    def argv(self, arguments):
        return ["/usr/bin/setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", self.binary] + arguments

    def hand_over(self, path, mode):
        os.chown(path, self.uid, self.gid)
        os.chmod(path, mode)


def spawn(argv, output, **options):
    """A child in a session of its own (a Ctrl-C at the terminal reaches the script, which stops
    it), stopped by the cleanup if the case does not."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT, start_new_session=True, **options)

    def stop():
        if process.poll() is None:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)

    process.cleanup = CLEANUP.add(f"process {process.pid} ({' '.join(argv[-12:])[:80]})", stop)
    return process


def finish(process, timeout=10):
    """SIGTERM, then SIGKILL past `timeout`; a stopped process is continued first."""
    if process.poll() is None:
        try:
            os.kill(process.pid, signal.SIGCONT)
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except ProcessLookupError:
            pass
    CLEANUP.discard(process.cleanup)


# MARK: Network


class Network:
    """The bridge, the three namespaces and their veths; the FORWARD rule that lets bridged
    traffic through when br_netfilter sends it to iptables."""

    def __init__(self, tag):
        self.subnet = self.free_subnet()
        hosts = list(self.subnet.hosts())
        self.bridge_ip = str(hosts[0])
        self.bridge = f"pgf{tag}br"
        self.namespaces = [f"pushgate-faults-{tag}-n{i}" for i in (1, 2, 3)]
        self.veths = [(f"pgf{tag}v{i}", f"pgf{tag}v{i}p") for i in (1, 2, 3)]
        self.node_ips = [str(hosts[9 + i]) for i in (1, 2, 3)]

    @staticmethod
    def free_subnet():
        taken = []
        for entry in json.loads(command(["ip", "-j", "-4", "addr"])):
            for address in entry.get("addr_info", []):
                taken.append(ipaddress.ip_network(f"{address['local']}/{address['prefixlen']}", strict=False))
        for route in json.loads(command(["ip", "-j", "-4", "route", "show", "table", "all"])):
            destination = route.get("dst", "")
            if destination and destination != "default" and route.get("type", "unicast") in ("unicast", "local"):
                try:
                    network = ipaddress.ip_network(destination if "/" in destination else destination + "/32", strict=False)
                except ValueError:
                    continue
                if network.prefixlen > 0:
                    taken.append(network)
        for third in range(256):
            candidate = ipaddress.ip_network(f"10.213.{third}.0/24")
            if not any(candidate.overlaps(network) for network in taken):
                return candidate
        raise SetupFailure("no free /24 in 10.213.0.0/16 for the test network")

    def up(self):
        command(["ip", "link", "add", self.bridge, "type", "bridge"])
        CLEANUP.add(f"bridge {self.bridge}", lambda: command(["ip", "link", "del", self.bridge], check=False))
        command(["ip", "addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge])
        command(["ip", "link", "set", self.bridge, "up"])
        bridged = "/proc/sys/net/bridge/bridge-nf-call-iptables"
        if os.path.exists(bridged) and open(bridged).read().strip() == "1":
            rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]
            command(["iptables", "-I"] + rule)
            CLEANUP.add("the FORWARD rule", lambda: command(["iptables", "-D"] + rule, check=False))
        for namespace, (outside, inside), address in zip(self.namespaces, self.veths, self.node_ips):
            command(["ip", "netns", "add", namespace])
            CLEANUP.add(f"namespace {namespace}", lambda n=namespace: command(["ip", "netns", "del", n], check=False))
            command(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside])
            CLEANUP.add(f"veth {outside}", lambda o=outside: command(["ip", "link", "del", o], check=False))
            command(["ip", "link", "set", inside, "netns", namespace])
            command(["ip", "link", "set", outside, "master", self.bridge, "up"])
            self.inside(namespace, ["ip", "addr", "add", f"{address}/24", "dev", inside])
            self.inside(namespace, ["ip", "link", "set", inside, "up"])
            self.inside(namespace, ["ip", "link", "set", "lo", "up"])

    @staticmethod
    def inside(namespace, argv, check=True):
        return command(["ip", "netns", "exec", namespace] + argv, check=check)


# MARK: PostgreSQL


class Postgres:
    """A throwaway server, as the Swift tests start one (PostgresServer.swift): initdb as the
    postgres user, fsync and synchronous_commit on, a socket directory of its own; listening on
    the bridge address, which the namespaces reach."""

    def __init__(self, work, host, subnet):
        for tool in ("initdb", "pg_ctl", "postgres", "psql"):
            if not os.access(os.path.join(POSTGRES_BIN, tool), os.X_OK):
                raise SetupFailure(
                    f"no {POSTGRES_BIN}/{tool}: install postgresql-15 (as .ci/run does) or set PUSHGATE_POSTGRES_BIN"
                )
        self.host = host
        self.directory = os.path.join(work, "postgres")
        self.data = os.path.join(self.directory, "data")
        self.socket = os.path.join(self.directory, "socket")
        self.log = os.path.join(self.directory, "server.log")
        self.password = "pw-" + uuid.uuid4().hex[:12]
        self.port = self.free_port(host)
        account = pwd.getpwnam("postgres")
        os.makedirs(self.socket)
        password_file = os.path.join(self.directory, "pwfile")
        with open(password_file, "w") as handle:
            handle.write(self.password + "\n")
        for path in (self.directory, self.socket, password_file):
            os.chown(path, account.pw_uid, account.pw_gid)
        os.chmod(self.directory, 0o700)
        self.tool(
            "initdb",
            ["-D", self.data, "-U", "postgres", "--pwfile", password_file, "-E", "UTF8", "--auth-local=trust",
             "--auth-host=scram-sha-256", "--no-sync"],
        )
        with open(os.path.join(self.data, "postgresql.conf"), "a") as handle:
            handle.write(
                f"\nfsync = on\nsynchronous_commit = on\nlisten_addresses = '{host}'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.socket}'\nmax_connections = 300\nshared_buffers = 64MB\n"
            )
        with open(os.path.join(self.data, "pg_hba.conf"), "a") as handle:
            handle.write(f"host all all {subnet} scram-sha-256\n")
        CLEANUP.add("PostgreSQL", lambda: self.tool("pg_ctl", ["-D", self.data, "-m", "immediate", "-w", "-t", "30", "stop"], check=False))
        self.tool("pg_ctl", ["-D", self.data, "-l", self.log, "-w", "-t", "60", "start"])

    @staticmethod
    def free_port(host):
        import socket

        with socket.socket() as probe:
            probe.bind((host, 0))
            return probe.getsockname()[1]

    def tool(self, name, arguments, check=True):
        return command([os.path.join(POSTGRES_BIN, name)] + arguments, user="postgres", check=check)

    def psql(self, sql, database="postgres"):
        return command(
            [os.path.join(POSTGRES_BIN, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.socket,
             "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql],
            timeout=30,
        ).strip()

    def url(self, database):
        return f"postgresql://postgres:{self.password}@{self.host}:{self.port}/{database}"

    def restart(self):
        self.tool("pg_ctl", ["-D", self.data, "-l", self.log, "-m", "fast", "-w", "-t", "60", "restart"])


# MARK: Nodes and agents


class Node:
    """One `pushgate serve` in its namespace, as nobody."""

    extra_arguments = []

    def __init__(self, env, index, directory):
        self.env = env
        self.name = f"n{index}"
        self.namespace = env.network.namespaces[index - 1]
        self.link = env.network.veths[index - 1][1]
        self.ip = env.network.node_ips[index - 1]
        self.url = f"http://{self.ip}:{NODE_PORT}"
        self.log_path = os.path.join(directory, f"{self.name}.log")
        self.data = os.path.join(directory, f"{self.name}-data")
        self.process = None

    def start(self, database_url_file):
        os.makedirs(self.data)
        self.env.unprivileged.hand_over(self.data, 0o700)
        arguments = [
            "serve", "--listen", f"{self.ip}:{NODE_PORT}", "--allow-insecure-cleartext",
            "--database-url-file", database_url_file, "--node-name", self.name, "--data-dir", self.data,
            "--heartbeat-interval", str(HEARTBEAT_SECONDS), "--drain-grace-seconds", "0",
            "--provider-key", f"{TEAM_ID}:{KEY_ID}:{self.env.provider_key_file}:{TOPIC}",
            "--registration-secret-file", self.env.registration_secret_file,
            "--admin-token-file", self.env.admin_token_file,
            "--device-creations-per-address-per-hour", "0",
        ] + self.extra_arguments
        with open(self.log_path, "ab") as output:
            self.process = spawn(["ip", "netns", "exec", self.namespace] + self.env.unprivileged.argv(arguments), output)

    @property
    def pid(self):
        return self.process.pid

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stopped(self):
        """Whether the process is stopped (SIGSTOP), from /proc."""
        with open(f"/proc/{self.pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "T"

    def get(self, path, timeout=2.0):
        with h2c_client(self.url, timeout=timeout) as client:
            return client.get(path, headers={"authorization": f"bearer {self.env.admin_token}"})

    def ready(self):
        return self.get("/readyz").status_code == 200

    def readiness(self):
        try:
            return self.get("/readyz").status_code
        except httpx.HTTPError:
            return None

    def nodes(self):
        """GET /v1/admin/nodes: {name: entry} of the live nodes this node lists."""
        response = self.get("/v1/admin/nodes")
        if response.status_code != 200:
            raise CaseFailure(f"GET {self.url}/v1/admin/nodes: {response.status_code} {response.text[:200]}")
        return {entry["name"]: entry for entry in response.json()["nodes"]}

    def owner(self, device_id):
        response = self.get(f"/v1/admin/devices/{device_id}")
        if response.status_code != 200:
            raise CaseFailure(f"GET {self.url}/v1/admin/devices/{device_id}: {response.status_code} {response.text[:200]}")
        body = response.json()
        return body.get("owner"), body

    def metric(self, name):
        """The value of `name{node="NAME"}` in /metrics."""
        response = self.get("/metrics")
        prefix = f'{name}{{node="{self.name}"}} '
        for line in response.text.splitlines():
            if line.startswith(prefix):
                return float(line[len(prefix):].split()[0])
        raise CaseFailure(f"{self.name}'s /metrics has no {prefix.strip()}")

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError:
            return ""


class Delivery:
    __slots__ = ("at", "apns_id", "seq", "delivery", "push_type", "node")

    def __init__(self, at, apns_id, seq, delivery, push_type, node):
        self.at, self.apns_id, self.seq, self.delivery, self.push_type, self.node = at, apns_id, seq, delivery, push_type, node


class Agent:
    """`pushgate agent` with the nodes as its --server list, in order, as nobody. Its output (JSON
    lines and, merged in order, its stderr messages) is read as it comes: which node it is on
    (the target of its last "connecting to"), its connects, losses and deliveries, timed."""

    def __init__(self, env, directory, name, servers):
        self.name = name
        self.servers = servers
        self.by_url = {node.url: node for node in servers}
        self.lock = threading.Lock()
        self.token = None
        self.device_id = None
        self.target = servers[0]
        self.on = None
        self.connects = []  # (monotonic, node name)
        self.losses = []  # (monotonic, node name)
        self.deliveries = []
        self.messages = []
        self.identity = os.path.join(directory, f"{name}.json")
        arguments = ["agent"]
        for node in servers:
            arguments += ["--server", node.url]
        arguments += ["--identity", self.identity, "--topic", TOPIC, "--registration-secret-file", env.registration_secret_file]
        self.process = spawn(env.unprivileged.argv(arguments), subprocess.PIPE)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for raw in self.process.stdout:
            now = time.monotonic()
            line = raw.decode(errors="replace").rstrip("\n")
            event = None
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except ValueError:
                    event = None
            with self.lock:
                if event is None:
                    self.messages.append((now, line))
                    self.heard(now, line)
                elif event.get("type") == "registered":
                    self.token = event["token"]
                    self.device_id = event["deviceId"]
                elif event.get("type") == "connected":
                    self.on = self.target
                    self.connects.append((now, self.target.name))
                elif "apnsId" in event:
                    self.deliveries.append(
                        Delivery(now, event["apnsId"], event.get("seq"), event.get("delivery"), event.get("pushType"),
                                 self.on.name if self.on else None)
                    )

    def heard(self, now, line):
        # "pushgate agent: connection to URL lost (...); connecting to URL2 in N ms", or
        # "...; reconnecting in N ms"
        line = line.removeprefix("pushgate agent: ")
        if not line.startswith("connection to ") or " lost " not in line:
            return
        lost = self.by_url.get(line[len("connection to "):].split(" ", 1)[0])
        self.losses.append((now, lost.name if lost else None))
        self.on = None
        if "; connecting to " in line:
            following = line.rsplit("; connecting to ", 1)[1].split(" ", 1)[0]
            self.target = self.by_url.get(following, self.target)
        elif lost is not None:
            self.target = lost

    def where(self):
        with self.lock:
            return self.on.name if self.on else None

    def delivered(self):
        with self.lock:
            return list(self.deliveries)

    def apns_ids(self):
        with self.lock:
            return {delivery.apns_id for delivery in self.deliveries}

    def losses_since(self, moment, node_name=None):
        with self.lock:
            return [t for (t, name) in self.losses if t >= moment and (node_name is None or name == node_name)]

    def connects_since(self, moment):
        with self.lock:
            return [(t, name) for (t, name) in self.connects if t >= moment]

    def tail(self):
        with self.lock:
            return [line for (_, line) in self.messages[-5:]]


# MARK: Provider


class Attempt:
    __slots__ = ("node", "sent", "answered", "status", "disposition", "error")

    def __init__(self, node, sent, answered, status, disposition, error):
        self.node, self.sent, self.answered = node, sent, answered
        self.status, self.disposition, self.error = status, disposition, error


class Push:
    """One push (one apns-id) and every attempt to send it."""

    def __init__(self, agent, node, silent):
        self.apns_id = new_apns_id()
        self.agent = agent
        self.first_node = node
        self.silent = silent
        self.attempts = []
        self.done = False

    @property
    def last(self):
        return self.attempts[-1] if self.attempts else None

    @property
    def status(self):
        return self.last.status if self.last else None

    @property
    def must_arrive(self):
        """Answered 200 and not held (a held silent push waits for budget or a wake event)."""
        return self.status == 200 and self.last.disposition != "held"


class Provider:
    """An APNs provider over h2c (httpx, pgcommon's helpers), one connection per node, on an
    asyncio loop of its own thread; ES256 provider tokens. A push answered 503 is sent again
    (same apns-id) to the same node after its retry-after; one without an answer (a connection
    that died) to the next node not marked down; both within the push's retry time."""

    def __init__(self, env, nodes):
        self.nodes = nodes
        self.down = set()
        self.token = jwt.encode({"iss": TEAM_ID, "iat": int(time.time())}, env.provider_signing_key, algorithm="ES256",
                                headers={"kid": KEY_ID})
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.clients = {}
        self.pushes = []
        self.lock = threading.Lock()

    def submit(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    async def post(self, node, push):
        entry = self.clients.get(node.name)
        if entry is None:
            entry = {"client": h2c_async_client(node.url, timeout=10.0, max_connections=1), "gate": asyncio.Lock(), "proven": False}
            self.clients[node.name] = entry
        if not entry["proven"]:
            # A gateway that authenticates providers allows one stream on a new connection until
            # the first token is checked: the first request on a connection goes alone.
            async with entry["gate"]:
                if not entry["proven"]:
                    response = await self.request(entry["client"], push)
                    entry["proven"] = True
                    return response
        try:
            return await self.request(entry["client"], push)
        except Exception:
            entry["proven"] = False  # the next connection starts gated again
            raise

    async def request(self, client, push):
        if push.silent:
            headers = {"apns-topic": TOPIC, "apns-push-type": "background", "apns-priority": "5", "apns-id": push.apns_id}
            body = {"aps": {"content-available": 1}}
        else:
            headers = alert_headers(TOPIC, push.apns_id)
            body = alert_body(push.apns_id)
        headers["authorization"] = f"bearer {self.token}"
        return await client.post(f"/3/device/{push.agent.token}", headers=headers, json=body)

    async def send(self, push, retry_for):
        deadline = time.monotonic() + retry_for
        node = push.first_node
        while True:
            sent = time.monotonic()
            status = disposition = error = None
            wait = 0.0
            try:
                response = await self.post(node, push)
                status = response.status_code
                disposition = response.headers.get("pushgate-disposition")
                if status != 200:
                    try:
                        disposition = response.json().get("reason")
                    except ValueError:
                        disposition = response.text[:100]
                    wait = float(response.headers.get("retry-after") or 1)
            except Exception as failure:  # no answer: the connection died or timed out
                error = f"{type(failure).__name__}: {failure}"
                wait = 0.25
            push.attempts.append(Attempt(node.name, sent, time.monotonic(), status, disposition, error))
            if status == 200 or (status is not None and status != 503) or time.monotonic() + wait > deadline:
                push.done = True
                return push
            await asyncio.sleep(wait)  # the answer's retry-after, or a short pause before another node
            if status is None:
                candidates = [n for n in self.nodes if n.name not in self.down]
                if candidates:
                    index = next((i for i, n in enumerate(candidates) if n.name == node.name), -1)
                    node = candidates[(index + 1) % len(candidates)]

    def push(self, agent, node, silent=False, retry_for=0.0):
        """Sends one push and waits for its outcome."""
        push = Push(agent, node, silent)
        with self.lock:
            self.pushes.append(push)
        return self.submit(self.send(push, retry_for)).result(timeout=retry_for + 30)

    def load(self, rate, agents, nodes, retry_for, count=None):
        return Load(self, rate, agents, nodes, retry_for, count)

    def close(self):
        async def close_all():
            for entry in self.clients.values():
                try:
                    await entry["client"].aclose()
                except Exception:
                    pass

        try:
            self.submit(close_all()).result(timeout=10)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class Load:
    """Pushes at `rate` per second, round-robin over the agents' devices and the nodes, until
    stopped or `count` were sent; each is sent again on 503 or no answer within `retry_for`."""

    def __init__(self, provider, rate, agents, nodes, retry_for, count):
        self.provider = provider
        self.rate, self.agents, self.nodes, self.retry_for, self.count = rate, agents, nodes, retry_for, count
        self.stopping = False
        self.sent = 0
        self.pushes = []
        self.started = time.monotonic()
        self.future = provider.submit(self.run())

    async def run(self):
        tasks = []
        loop = asyncio.get_running_loop()
        start = loop.time()
        index = 0
        while not self.stopping and (self.count is None or index < self.count):
            delay = start + index / self.rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # the load's pace
            agent = self.agents[index % len(self.agents)]
            node = self.nodes[(index + index // len(self.agents)) % len(self.nodes)]
            push = Push(agent, node, False)
            with self.provider.lock:
                self.provider.pushes.append(push)
            self.pushes.append(push)
            tasks.append(asyncio.ensure_future(self.provider.send(push, self.retry_for)))
            index += 1
            self.sent = index
        await asyncio.gather(*tasks)

    def stop(self, timeout=None):
        self.stopping = True
        return self.future.result(timeout=timeout if timeout is not None else self.retry_for + 30)

    def finished(self, timeout):
        return self.future.result(timeout=timeout)

    def answered_after(self, moment, agent=None):
        """Pushes answered 200 after `moment` (for `agent` if given)."""
        return [p for p in list(self.pushes) if p.done and p.status == 200 and p.last.answered > moment
                and (agent is None or p.agent is agent)]


# MARK: The environment and one case's cluster


class Environment:
    """What every case shares: the work directory, the binary's copy, the secrets, the network
    and the PostgreSQL server."""

    def __init__(self, binary):
        self.work = tempfile.mkdtemp(prefix="pushgate-faults-run-")
        CLEANUP.add(f"directory {self.work}", lambda: shutil.rmtree(self.work, ignore_errors=True))
        os.chmod(self.work, 0o755)
        self.unprivileged = Unprivileged(binary, self.work)
        secrets = os.path.join(self.work, "secrets")
        os.makedirs(secrets, mode=0o755)
        self.admin_token = "admin-" + uuid.uuid4().hex
        self.admin_token_file = self.secret(secrets, "admin-token", self.admin_token + "\n")
        self.registration_secret_file = self.secret(secrets, "registration-secret", "registration-" + uuid.uuid4().hex + "\n")
        key = ec.generate_private_key(ec.SECP256R1())
        self.provider_signing_key = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self.provider_key_file = self.secret(secrets, f"AuthKey_{KEY_ID}.p8", self.provider_signing_key.decode())
        self.network = Network(os.getpid() % 100000)
        self.network.up()
        self.postgres = Postgres(self.work, self.network.bridge_ip, self.network.subnet)
        for namespace in self.network.namespaces:
            command(["ip", "netns", "exec", namespace, os.path.join(POSTGRES_BIN, "pg_isready"), "-h",
                     self.network.bridge_ip, "-p", str(self.postgres.port), "-t", "10"])

    def secret(self, directory, name, text):
        path = os.path.join(directory, name)
        with open(path, "w") as handle:
            handle.write(text)
        self.unprivileged.hand_over(path, 0o600)
        return path


class Cluster:
    """One case's new database, its three nodes (started and members), agents and provider."""

    def __init__(self, env, case):
        self.env = env
        self.case = case
        self.directory = os.path.join(env.work, case)
        os.makedirs(self.directory, mode=0o755)
        self.agents_directory = os.path.join(self.directory, "agents")
        os.makedirs(self.agents_directory)
        env.unprivileged.hand_over(self.agents_directory, 0o700)
        self.database = "faults_" + case.replace("-", "_")
        env.postgres.psql(f"CREATE DATABASE {self.database}")
        url_file = os.path.join(self.directory, "database-url")
        with open(url_file, "w") as handle:
            handle.write(env.postgres.url(self.database) + "\n")
        env.unprivileged.hand_over(url_file, 0o600)
        self.url_file = url_file
        self.nodes = [Node(env, index, self.directory) for index in (1, 2, 3)]
        self.provider = None
        self.agents = []

    def start(self):
        for node in self.nodes:
            node.start(self.url_file)
        wait_until("the three nodes ready (/readyz 200)", 60, lambda: all(node.ready() for node in self.nodes))
        wait_until("every node lists the three", 15, lambda: all(len(node.nodes()) == 3 for node in self.nodes))
        self.provider = Provider(self.env, self.nodes)

    def node(self, name):
        return next(node for node in self.nodes if node.name == name)

    def start_agents(self, first, count):
        """`count` agents whose --server list starts at `first`, then the others in turn."""
        index = self.nodes.index(first)
        servers = self.nodes[index:] + self.nodes[:index]
        started = []
        for _ in range(count):
            agent = Agent(self.env, self.agents_directory, f"agent{len(self.agents) + 1}", servers)
            self.agents.append(agent)
            started.append(agent)
        return started

    def agents_on_first_node(self, count):
        """`count` agents on n1 and one on each other node, connected, warmed up through n2 and
        settled: the agents on n1, the devices a fault to n1 must move."""
        n1, n2 = self.nodes[0], self.nodes[1]
        held = self.start_agents(n1, count)
        for node in self.nodes[1:]:
            self.start_agents(node, 1)
        self.wait_connected(self.agents)
        self.warm_up(self.agents, n2)
        self.wait_settled(self.agents)
        return held

    def wait_connected(self, agents, seconds=30):
        def connected():
            for agent in agents:
                if agent.process.poll() is not None:
                    raise CaseFailure(f"{agent.name} exited {agent.process.returncode}: {agent.tail()}")
            return all(agent.where() is not None and agent.token for agent in agents)

        return wait_until(f"{len(agents)} agents connected", seconds, connected, interval=0.1)

    def wait_settled(self, agents, seconds=15):
        """Each agent's device held by the node its stream is on, nothing unacknowledged: from the
        admin device view, asked of the node the agent is on."""

        def settled():
            for agent in agents:
                owner, view = self.node(agent.where()).owner(agent.device_id)
                if owner != agent.where() or view.get("notifications") or view.get("unackedBytes"):
                    return False
            return True

        return wait_until("devices owned where their streams are, everything acked", seconds, settled, interval=0.1)

    def warm_up(self, agents, via):
        """One push per agent through `via`, answered 200 and delivered: the cluster works before
        the fault."""
        for agent in agents:
            push = self.provider.push(agent, via)
            if push.status != 200:
                raise CaseFailure(f"warm-up push to {agent.name} via {via.name}: {describe(push)}")
        wait_until("warm-up pushes delivered", 15, lambda: all(
            p.apns_id in p.agent.apns_ids() for p in self.provider.pushes if p.must_arrive))

    def leases(self, name):
        """The node's lease rows in the database, newest first: [(lease_id, expires_at epoch, expired)]."""
        rows = self.env.postgres.psql(
            "SELECT lease_id, extract(epoch FROM expires_at), expires_at <= clock_timestamp() FROM node_leases "
            f"WHERE node_name = '{name}' ORDER BY lease_id DESC",
            self.database,
        )
        return [(int(a), float(b), c == "t") for a, b, c in (line.split("|") for line in rows.splitlines() if line)]

    def close(self):
        for agent in self.agents:
            finish(agent.process, timeout=5)
        if self.provider:
            self.provider.close()
        for node in self.nodes:
            if node.process:
                finish(node.process, timeout=10)

    def logs(self):
        text = "\n".join(f"--- {node.name} ({node.log_path}), last lines:\n{node.log_tail()}" for node in self.nodes)
        for agent in self.agents[:8]:
            text += f"\n--- {agent.name} (on {agent.where()}), last messages:\n" + "\n".join(agent.tail())
        return text


def describe(push):
    tries = "; ".join(
        f"{a.node} {a.status if a.status is not None else a.error} {a.disposition or ''} in {a.answered - a.sent:.3f} s"
        for a in push.attempts
    )
    return f"{push.apns_id} to {push.agent.name} [{tries}]"


def seconds(value):
    return f"{value:.1f} s"


# MARK: Invariants


def check_invariants(cluster, strict_fencing=False, settle=0.0):
    """The invariants every case asserts, over every push the case sent and every agent; returns
    (failures, figures). `strict_fencing`: a push written twice or written though refused can only
    have been written by a node that had lost its devices (a paused or cut node): a failure.
    `settle`: watch that long for late deliveries (a resumed node's stale writes) once all are in."""
    failures = []
    pushes = list(cluster.provider.pushes)
    unfinished = [p for p in pushes if not p.done]
    if unfinished:
        failures.append(f"{len(unfinished)} pushes still unanswered at the check")
    must = [p for p in pushes if p.must_arrive]

    def missing():
        return [p for p in must if p.apns_id not in p.agent.apns_ids()]

    try:
        wait_until("every push answered 200 delivered", 30, lambda: not missing(), interval=0.1)
    except CaseFailure:
        lost = missing()
        failures.append(f"{len(lost)} of {len(must)} pushes answered 200 never delivered, e.g. {describe(lost[0])}")

    def tally():
        by_id = {p.apns_id: p for p in pushes}
        found = {"same_seq": [], "twice": [], "resent": [], "refused": [], "over_budget": []}
        for agent in cluster.agents:
            groups = {}
            for delivery in agent.delivered():
                groups.setdefault(delivery.apns_id, []).append(delivery)
            for apns_id, deliveries in groups.items():
                seqs = [d.seq for d in deliveries]
                push = by_id.get(apns_id)
                if len(seqs) != len(set(seqs)):
                    found["same_seq"].append(f"{apns_id} seq {seqs} to {agent.name} on {[d.node for d in deliveries]}")
                if len(set(seqs)) > 1:
                    if push is not None and any(a.status != 200 for a in push.attempts):
                        found["resent"].append(f"{describe(push)} seqs {sorted(set(seqs))}")
                    else:
                        sent = push.attempts[0].sent if push is not None and push.attempts else deliveries[0].at
                        copies = ", ".join(f"seq {d.seq} {d.delivery} on {d.node} at +{d.at - sent:.3f} s" for d in deliveries)
                        with agent.lock:
                            moves = ", ".join(f"{what} {name} at +{t - sent:.3f} s" for what, events in
                                              (("lost", agent.losses), ("connected", agent.connects))
                                              for t, name in events if t >= sent - 1)
                        found["twice"].append(f"{describe(push) if push else apns_id}: {copies}; agent {moves or 'stayed'}")
                if push is not None and push.status != 200:
                    found["refused"].append(describe(push))
            on_budget = {d.apns_id for d in agent.delivered() if d.push_type == "background" and d.delivery in ("immediate", "budget")}
            if len(on_budget) > APP_BURST:
                found["over_budget"].append(f"{agent.name}: {len(on_budget)} silent pushes delivered on budget")
        return found

    found = tally()
    if settle and not failures:
        try:
            holds_for("no late delivery", settle, lambda: tally() == found)
        except CaseFailure:
            found = tally()
            failures.append("a delivery came late (after every push had arrived): " + "; ".join(
                found["same_seq"][:2] + found["twice"][:2] + found["resent"][:2] + found["refused"][:2]))
    if found["same_seq"]:
        failures.append(f"{len(found['same_seq'])} notifications delivered again after the agent had them (and acked "
                        f"them, at the latest by Last-Event-ID): {found['same_seq'][:3]}")
    if found["twice"]:
        failures.append(f"{len(found['twice'])} pushes stored twice though sent once: {found['twice'][:3]}")
    if found["over_budget"]:
        failures.append(f"silent budget exceeded: {found['over_budget']}")
    if strict_fencing and found["resent"]:
        failures.append(f"{len(found['resent'])} pushes answered 503 (or not at all) were written anyway, by a node "
                        f"that had lost its devices: {found['resent'][:3]}")
    if strict_fencing and found["refused"]:
        failures.append(f"{len(found['refused'])} pushes refused to the provider were delivered: {found['refused'][:3]}")
    answered = [p for p in pushes if p.status == 200]
    retried = [p for p in pushes if len(p.attempts) > 1]
    figures = (
        f"{len(pushes)} pushes, {len(answered)} answered 200 ({len(retried)} after a retry), "
        f"{len(pushes) - len(answered)} not, {len(must) - len(missing())}/{len(must)} delivered, "
        f"duplicates: {len(found['same_seq'])} redelivered, "
        f"{len(found['resent'])} written twice after a retry"
    )
    if found["refused"] and not strict_fencing:
        figures += f", {len(found['refused'])} delivered though refused"
    if len(answered) < len(pushes):
        figures += f" (not 200, e.g. {describe(next(p for p in pushes if p.status != 200))})"
    return failures, figures


class Watch:
    """Polls each node's /readyz in a thread; records when each answered anything but 200."""

    def __init__(self, nodes, interval=0.1):
        self.nodes = nodes
        self.not_ready = {node.name: [] for node in nodes}
        self.stopping = False
        self.interval = interval
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopping:
            for node in self.nodes:
                status = node.readiness()
                if status != 200:
                    self.not_ready[node.name].append((time.monotonic(), status))
            time.sleep(self.interval)  # the polling period

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=10)
        return {name: seen for name, seen in self.not_ready.items() if seen}


# MARK: The cases


def moved_off(agents, node, since):
    """The seconds from `since` until the last of `agents` connected to another node than
    `node`, and that node's name, once each has."""
    moments = []
    for agent in agents:
        connects = [c for c in agent.connects_since(since) if c[1] != node.name]
        if not connects:
            return None
        moments.append(connects[0][0])
    return max(moments) - since


def delivered_after(load, agents, moment):
    """Whether each agent got a push answered 200 after `moment`."""
    return all(any(p.apns_id in agent.apns_ids() for p in load.answered_after(moment, agent)) for agent in agents)


def unanswered(pushes):
    return [p for p in pushes if any(a.status is None for a in p.attempts)]


def case_db_cut(cluster):
    """n1 cut from PostgreSQL (iptables in its namespace) while its devices stay connected."""
    n1, n2, n3 = cluster.nodes
    figures, failures = [], []
    held = cluster.agents_on_first_node(6)
    pid = n1.pid
    postgres = cluster.env.postgres
    rules = [
        ["OUTPUT", "-p", "tcp", "-d", postgres.host, "--dport", str(postgres.port), "-j", "DROP"],
        ["INPUT", "-p", "tcp", "-s", postgres.host, "--sport", str(postgres.port), "-j", "DROP"],
    ]
    for rule in rules:
        Network.inside(n1.namespace, ["iptables", "-A"] + rule)
    cut = True
    t0 = time.monotonic()
    load = cluster.provider.load(4, cluster.agents, [n2, n3], retry_for=30)
    try:
        wait_until("n1's /readyz 503", 15, lambda: n1.readiness() == 503)
        figures.append(f"readyz 503 after {seconds(time.monotonic() - t0)}")
        wait_until("n1's device streams ended", 20, lambda: all(a.losses_since(t0, "n1") for a in held))
        figures.append(f"streams ended after {seconds(max(a.losses_since(t0, 'n1')[0] for a in held) - t0)}")
        wait_until("n1's agents connected to n2 or n3", 20, lambda: moved_off(held, n1, t0) is not None)
        figures.append(f"on n2/n3 after {seconds(moved_off(held, n1, t0))}")
        moment = time.monotonic()
        wait_until("a push sent to n2/n3 after the move delivered to each of n1's agents", 20,
                   lambda: delivered_after(load, held, moment))
        for rule in rules:
            Network.inside(n1.namespace, ["iptables", "-D"] + rule)
        cut = False
        t1 = time.monotonic()
        wait_until("n1 ready again", 30, n1.ready)
        figures.append(f"ready again after {seconds(time.monotonic() - t1)}")
        wait_until("n1 listed by n2", 30, lambda: "n1" in n2.nodes())
        figures.append(f"listed after {seconds(time.monotonic() - t1)}")
        if not n1.alive() or n1.pid != pid:
            failures.append("n1 did not stay up (it must come back without a restart)")
    finally:
        if cut:
            for rule in rules:
                Network.inside(n1.namespace, ["iptables", "-D"] + rule, check=False)
        load.stop()
    silent = unanswered(load.pushes)
    if silent:
        failures.append(f"{len(silent)} pushes to n2/n3 during the cut got no answer, e.g. {describe(silent[0])}")
    refused = [p for p in load.pushes if p.status != 200]
    if refused:
        failures.append(f"{len(refused)} pushes to n2/n3 not answered 200 within 30 s of retries, e.g. {describe(refused[0])}")
    figures.append(f"{sum(1 for p in load.pushes if any(a.status == 503 for a in p.attempts))} of {len(load.pushes)} "
                   "pushes to n2/n3 answered 503 first")
    more_failures, summary = check_invariants(cluster)
    return figures + [summary], failures + more_failures


def n1_back_taking_nothing(cluster, held, lease, t1, called):
    """Waits until n1 (`called` so in messages) is a member again under a new lease and ready,
    then checks for 4 s that none of `held`'s streams moves back and n1 holds no device. Returns
    the seconds from `t1` until it was back."""
    n1, n2 = cluster.nodes[0], cluster.nodes[1]
    wait_until(f"{called} joins again under a new lease", 30,
               lambda: (lambda rows: rows and rows[0][0] != lease and not rows[0][2])(cluster.leases("n1")))
    wait_until("n1 ready again", 30, n1.ready)
    back = time.monotonic() - t1
    losses_before = sum(len(a.losses_since(t1)) for a in held)

    def nothing_taken_back():
        return sum(len(a.losses_since(t1)) for a in held) == losses_before and n2.nodes()["n1"]["devicesHeld"] == 0

    holds_for(f"{called} takes nothing back (no stream moved, n1 holds no device)", 4, nothing_taken_back)
    return back


def case_node_cut(cluster):
    """n1's link down (inside n1) with devices on it, then up again."""
    n1, n2, n3 = cluster.nodes
    figures, failures = [], []
    held = cluster.agents_on_first_node(4)
    lease = cluster.leases("n1")[0][0]
    Network.inside(n1.namespace, ["ip", "link", "set", n1.link, "down"])
    down = True
    t0, wall0 = time.monotonic(), time.time()
    load = cluster.provider.load(4, held, [n2], retry_for=30)
    try:
        wait_until("n1's lease expired in the database", 15,
                   lambda: any(row[0] == lease and row[2] for row in cluster.leases("n1")))
        expiry = next(row[1] for row in cluster.leases("n1") if row[0] == lease) - wall0
        figures.append(f"lease expired {seconds(expiry)} after the cut")
        wait_until("n1's agents connected to n2 or n3", 20, lambda: moved_off(held, n1, t0) is not None)
        figures.append(f"agents on n2/n3 after {seconds(moved_off(held, n1, t0))}")
        moment = time.monotonic()
        wait_until("a push answered 200 after the move delivered to each of n1's agents", 20,
                   lambda: delivered_after(load, held, moment))
        load.stop()
        Network.inside(n1.namespace, ["ip", "link", "set", n1.link, "up"])
        down = False
        t1 = time.monotonic()
    finally:
        if down:
            Network.inside(n1.namespace, ["ip", "link", "set", n1.link, "up"], check=False)
        load.stop()
    attempts = [(a.sent, a.answered, p.agent.name, a.status) for p in load.pushes for a in p.attempts]
    refused = [a for a in attempts if a[3] == 503]
    if not refused:
        failures.append("no push to n2 for n1's devices was answered 503 while n1 held them")
    else:
        figures.append(f"503 to n2 for n1's devices until {seconds(max(a[1] for a in refused) - t0)} "
                       f"(the last sent at {seconds(max(a[0] for a in refused) - t0)}), "
                       f"first 200 at {seconds(min(a[1] for a in attempts if a[3] == 200) - t0)}")
    for agent in held:
        mine = [a for a in attempts if a[2] == agent.name]
        first_200 = min((a[1] for a in mine if a[3] == 200), default=None)
        late = [a for a in mine if a[3] != 200 and first_200 is not None and a[0] > first_200]
        if late:
            failures.append(f"{agent.name}: a push sent {seconds(late[0][0] - t0)} after the cut, after one was "
                            f"answered 200, was answered {late[0][3]}")
    silent = unanswered(load.pushes)
    if silent:
        failures.append(f"{len(silent)} pushes to n2 got no answer, e.g. {describe(silent[0])}")
    back = n1_back_taking_nothing(cluster, held, lease, t1, "n1")
    figures.append(f"n1 back under a new lease after {seconds(back)}")
    for agent in held:
        owner, _ = n2.owner(agent.device_id)
        if owner == "n1":
            failures.append(f"{agent.name}'s device went back to n1")
    for agent in held:
        push = cluster.provider.push(agent, n1)
        if push.status != 200:
            failures.append(f"a push through the rejoined n1: {describe(push)}")
    more_failures, summary = check_invariants(cluster, strict_fencing=True, settle=3)
    return figures + [summary], failures + more_failures


def case_kill_under_load(cluster):
    """100 agents over the nodes, a provider load on all, the node holding most devices killed
    -9 half-way; one more device takes silent pushes to check its budget across the takeover."""
    nodes = cluster.nodes
    figures, failures = [], []
    devices = [cluster.start_agents(nodes[i % 3], 1)[0] for i in range(100)]
    silent = cluster.start_agents(nodes[0], 1)[0]
    connected = cluster.wait_connected(cluster.agents, 120)
    figures.append(f"101 agents connected in {seconds(connected)}")
    wait_until("the nodes count the 101 devices", 20,
               lambda: sum(entry["devicesHeld"] for entry in nodes[1].nodes().values()) == 101)
    counts = nodes[1].nodes()
    victim = cluster.node(max(sorted(counts), key=lambda name: counts[name]["devicesHeld"]))
    moving = [agent for agent in cluster.agents if agent.where() == victim.name]
    for node in nodes:
        push = cluster.provider.push(silent, node, silent=True)
        if push.status != 200 or push.last.disposition != "delivered":
            failures.append(f"silent push {len([p for p in cluster.provider.pushes if p.silent])} of 3: {describe(push)}")
    wait_until("3 silent pushes delivered", 15, lambda: len(silent.apns_ids()) == 3)
    load = cluster.provider.load(300, devices, nodes, retry_for=20, count=3000)
    wait_until("half the load sent", 30, lambda: load.sent >= 1500)
    os.kill(victim.pid, signal.SIGKILL)
    t_kill = time.monotonic()
    cluster.provider.down.add(victim.name)
    victim.process.wait(timeout=10)
    figures.append(f"killed {victim.name} holding {len(moving)} devices after {load.sent} pushes")
    wait_until(f"{victim.name}'s agents connected elsewhere", 30, lambda: moved_off(moving, victim, t_kill) is not None)
    figures.append(f"all on other nodes after {seconds(moved_off(moving, victim, t_kill))}")
    load.finished(timeout=90)
    sent_for = max(p.attempts[0].sent for p in load.pushes) - min(p.attempts[0].sent for p in load.pushes)
    figures.append(f"load {len(load.pushes)} pushes in {seconds(sent_for)} ({len(load.pushes) / max(sent_for, 0.001):.0f}/s)")
    survivors = [node for node in nodes if node is not victim]
    dispositions = []
    for node in survivors + survivors[:1]:
        push = cluster.provider.push(silent, node, silent=True, retry_for=10)
        dispositions.append(push.last.disposition if push.status == 200 else str(push.status))
    if dispositions != ["held"] * 3:
        failures.append(f"silent pushes past the budget after the takeover answered {dispositions}, expected held")
    figures.append(f"silent after takeover: {dispositions}")
    more_failures, summary = check_invariants(cluster)
    return figures + [summary], failures + more_failures


def under_light_load(cluster, fault, what):
    """Six agents (two per node), 20 pushes/s through all nodes, `fault()` once the load runs;
    readiness watched throughout. Returns (figures, failures, not_ready)."""
    nodes = cluster.nodes
    figures, failures = [], []
    for node in nodes:
        cluster.start_agents(node, 2)
    cluster.wait_connected(cluster.agents)
    cluster.warm_up(cluster.agents, nodes[0])
    cluster.wait_settled(cluster.agents)
    watch = Watch(nodes)
    load = cluster.provider.load(20, cluster.agents, nodes, retry_for=30)
    try:
        wait_until("the load under way", 10, lambda: len(load.answered_after(0)) >= 20)
        figures += fault()
        moment = time.monotonic()
        wait_until(f"pushes answered 200 and delivered through every node after {what}", 30, lambda: all(
            any(p.last.node == node.name and p.apns_id in p.agent.apns_ids() for p in load.answered_after(moment))
            for node in nodes))
    finally:
        load.stop()
        not_ready = watch.stop()
    refused = [p for p in load.pushes if p.status != 200]
    if refused:
        failures.append(f"{len(refused)} pushes not answered 200 within 30 s of retries, e.g. {describe(refused[0])}")
    figures.append(f"{sum(1 for p in load.pushes if len(p.attempts) > 1)} of {len(load.pushes)} pushes needed a retry")
    return figures, failures, not_ready


def lease_losses(cluster):
    return {node.name: int(node.metric("pushgate_cluster_lease_losses_total")) for node in cluster.nodes}


def case_pg_restart(cluster):
    """PostgreSQL restarted (pg_ctl restart -m fast) under a light load."""
    postgres = cluster.env.postgres

    def fault():
        start = time.monotonic()
        postgres.restart()
        took = time.monotonic() - start
        wait_until("every node a member again, listing the three", 30,
                   lambda: all(node.ready() and len(node.nodes()) == 3 for node in cluster.nodes))
        return [f"restart took {seconds(took)}, all members after {seconds(time.monotonic() - start)}"]

    figures, failures, not_ready = under_light_load(cluster, fault, "the restart")
    figures.append(f"readyz 503 seen on {sorted(not_ready) or 'none'}, lease losses {lease_losses(cluster)}")
    more_failures, summary = check_invariants(cluster)
    return figures + [summary], failures + more_failures


def case_cluster_connection_terminated(cluster):
    """pg_terminate_backend on every 'pushgate-cluster' connection (the nodes' lease and claim
    connections), twice, under a light load: no lease lost."""
    postgres = cluster.env.postgres
    database = cluster.database
    failures = []
    leases = {node.name: cluster.leases(node.name)[0][0] for node in cluster.nodes}

    def renewed_since(moment):
        """Whether every node renewed its lease (the same one) after `moment`, the database's
        time: a renewal sets the expiry to its time plus the lease (5 s)."""
        for node in cluster.nodes:
            rows = cluster.leases(node.name)
            if rows[0][0] != leases[node.name] or rows[0][1] <= moment + 4.9:
                return False
        return True

    def fault():
        figures = []
        for round in (1, 2):
            terminated, at = postgres.psql(
                "SELECT count(*), extract(epoch FROM max(clock_timestamp())) FROM (SELECT pg_terminate_backend(pid) "
                "FROM pg_stat_activity WHERE application_name = 'pushgate-cluster' AND datname = current_database()) AS t",
                database).split("|")
            if int(terminated) == 0:
                raise CaseFailure("no 'pushgate-cluster' connection to terminate")
            start = time.monotonic()
            wait_until("every node renewed its lease after the termination", 10, lambda: renewed_since(float(at)))
            figures.append(f"round {round}: {terminated} terminated, leases renewed after {seconds(time.monotonic() - start)}")
        return figures

    figures, more_failures, not_ready = under_light_load(cluster, fault, "the terminations")
    failures += more_failures
    losses = lease_losses(cluster)
    if any(losses.values()):
        failures.append(f"lease losses: {losses}")
    if not_ready:
        failures.append(f"/readyz was not 200 on {sorted(not_ready)}: {dict((k, v[:3]) for k, v in not_ready.items())}")
    figures.append(f"lease losses {losses}")
    more_failures, summary = check_invariants(cluster)
    return figures + [summary], failures + more_failures


def case_pause(cluster):
    """n1, holding devices, stopped (SIGSTOP) past its lease, then continued."""
    n1, n2, n3 = cluster.nodes
    figures, failures = [], []
    held = cluster.agents_on_first_node(3)
    lease = cluster.leases("n1")[0][0]
    os.kill(n1.pid, signal.SIGSTOP)
    paused = True
    t0, wall0 = time.monotonic(), time.time()
    load = cluster.provider.load(4, held, [n2, n3], retry_for=30)
    try:
        wait_until("n1's agents connected to n2 or n3", 20, lambda: moved_off(held, n1, t0) is not None)
        figures.append(f"agents on n2/n3 after {seconds(moved_off(held, n1, t0))}")
        wait_until("n1's lease expired in the database", 15,
                   lambda: any(row[0] == lease and row[2] for row in cluster.leases("n1")))
        figures.append(f"lease expired {seconds(next(r[1] for r in cluster.leases('n1') if r[0] == lease) - wall0)} "
                       "after the pause")
        moment = time.monotonic()
        wait_until("a push answered 200 after the move delivered to each of n1's agents", 20,
                   lambda: delivered_after(load, held, moment))
        if not n1.stopped():
            failures.append("n1 was not stopped while its devices' pushes arrived elsewhere")
        load.stop()
        figures.append(f"delivered on the new nodes {seconds(time.monotonic() - t0)} into the pause")
        os.kill(n1.pid, signal.SIGCONT)
        paused = False
        t1 = time.monotonic()
    finally:
        if paused:
            os.kill(n1.pid, signal.SIGCONT)
        load.stop()
    back = n1_back_taking_nothing(cluster, held, lease, t1, "the resumed n1")
    figures.append(f"n1 back under a new lease {seconds(back)} after SIGCONT")
    for agent in held:
        push = cluster.provider.push(agent, n1)
        if push.status != 200:
            failures.append(f"a push through the resumed n1: {describe(push)}")
    more_failures, summary = check_invariants(cluster, strict_fencing=True, settle=3)
    return figures + [summary], failures + more_failures


CASES = [
    ("db-cut", case_db_cut),
    ("node-cut", case_node_cut),
    ("kill-under-load", case_kill_under_load),
    ("pg-restart", case_pg_restart),
    ("cluster-connection-terminated", case_cluster_connection_terminated),
    ("pause", case_pause),
]


# MARK: Main


def main():
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pushgate", default=os.path.join(REPO, ".build", "debug", "pushgate"), help="the pushgate binary")
    parser.add_argument("--case", action="append", choices=[name for name, _ in CASES], help="run this case (repeatable; default all)")
    parser.add_argument("--keep-logs", metavar="DIR", help="copy each case's node logs (and PostgreSQL's) to DIR/CASE/")
    parser.add_argument("--verbose", action="store_true", help="progress on stderr")
    parser.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                        help="one more argument for every node's `pushgate serve` (repeatable), e.g. --serve-arg=--log-level=debug")
    args = parser.parse_args()
    VERBOSE = args.verbose
    Node.extra_arguments = args.serve_arg
    if os.geteuid() != 0:
        sys.stderr.write("faults.py: FAIL: must run as root (network namespaces, a bridge, iptables; the nodes then run as nobody)\n")
        return 2
    if not os.access(args.pushgate, os.X_OK):
        sys.stderr.write(f"faults.py: FAIL: no pushgate binary at {args.pushgate} (swift build, or --pushgate PATH)\n")
        return 2
    for tool in ("ip", "iptables", "setpriv", "runuser", "getent"):
        if shutil.which(tool) is None:
            sys.stderr.write(f"faults.py: FAIL: {tool} is not installed (iproute2, iptables, util-linux)\n")
            return 2
    selected = [(name, case) for name, case in CASES if not args.case or name in args.case]
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    atexit.register(CLEANUP.run)
    started = time.monotonic()
    failed = []
    try:
        env = Environment(args.pushgate)
        print(f"network {env.network.subnet} (bridge {env.network.bridge}), PostgreSQL on "
              f"{env.network.bridge_ip}:{env.postgres.port}, nodes on {', '.join(env.network.node_ips)} port {NODE_PORT}", flush=True)
        for name, case in selected:
            case_start = time.monotonic()
            cluster = None
            figures, failures = [], []
            try:
                log(f"{name}: starting")
                cluster = Cluster(env, name)
                cluster.start()
                figures, failures = case(cluster)
            except (CaseFailure, SetupFailure) as failure:
                failures = [str(failure)]
            finally:
                logs = cluster.logs() if cluster and failures else ""
                if cluster:
                    cluster.close()
            if args.keep_logs:
                kept = os.path.join(args.keep_logs, name)
                os.makedirs(kept, exist_ok=True)
                for file in os.listdir(os.path.join(env.work, name)):
                    if file.endswith(".log"):
                        shutil.copy(os.path.join(env.work, name, file), kept)
                shutil.copy(env.postgres.log, os.path.join(kept, "postgresql.log"))
            verdict = "FAIL" if failures else "PASS"
            line = f"{name}: {verdict} in {seconds(time.monotonic() - case_start)}: " + ", ".join(figures)
            if failures:
                line += "\n  " + "\n  ".join(failures)
                failed.append(name)
            print(line, flush=True)
            if logs:
                sys.stderr.write(logs + "\n")
    except SetupFailure as failure:
        sys.stderr.write(f"faults.py: cannot run: {failure}\n")
        return 2
    except KeyboardInterrupt as interrupt:
        sys.stderr.write(f"faults.py: interrupted ({interrupt}); cleaning up\n")
        return 130
    finally:
        CLEANUP.run()
    total = time.monotonic() - started
    print(f"{len(selected) - len(failed)} of {len(selected)} cases passed in {seconds(total)}"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
