#!/usr/bin/env python3
"""The scripts' shared helpers (standard library only): free loopback ports, a minimal RESP2
client (nothing between the clock and the server), waiting until a server answers PING, a
server process on a free port in its own directory, stopped (and the directory removed) on close,
a throwaway PostgreSQL (`Postgres`), a Redis Cluster of redis-server nodes with a module
(`Cluster`), node-redis installed once for the node client scripts (`node_redis`), a gate's
GATE.INFO and committed backlog (`gate_info`, `gate_drained`), the Go gate client's build
(`build_gatetier`), closing a run's parts and scratch directory (`close_all`), and the
benchmarks' percentile of a sorted list.

A Python script elsewhere under scripts/ imports it after putting this directory on its path,
relative to its own file, so it runs from any cwd:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import bgtest

Shell scripts run it:

    python3 scripts/lib/bgtest.py free-port [N]      N distinct free ports (default 1), one a line
    python3 scripts/lib/bgtest.py wait PORT [--pid PID] [--seconds S]
        until PORT answers PING and is done loading (default 30 s); exits 1, saying why, when
        process PID exits first or the time is up
    python3 scripts/lib/bgtest.py skip WHAT WHY
        `skip_or_fail(WHAT, WHY)`: exits 1 under BLOOMGATE_NO_SKIP=1 (CI), else notes the skip

A check that cannot run here (a program it needs is missing) calls `skip_or_fail`, the twin of
the Rust tests' `bloomgate_testkit::skip_or_fail`: under BLOOMGATE_NO_SKIP=1 (`.ci/run` sets it)
that is a failure; elsewhere a SKIPPED line, recorded in $BLOOMGATE_SKIP_LOG when set (`.ci/run`
counts the skips there, and fails on any).
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


NO_SKIP = "BLOOMGATE_NO_SKIP"
SKIP_LOG = "BLOOMGATE_SKIP_LOG"


def no_skip():
    """Whether a check that cannot run must fail instead of skipping (CI)."""
    return os.environ.get(NO_SKIP) == "1"


def record_skip(note):
    """Appends one skip's line to $BLOOMGATE_SKIP_LOG, when that is set."""
    path = os.environ.get(SKIP_LOG)
    if path:
        with open(path, "a") as log:
            log.write(note.replace("\n", " ") + "\n")


def skip_or_fail(what, why):
    """`what` cannot run here because of `why` (what is missing, and what installs it): under
    BLOOMGATE_NO_SKIP=1 exits with status 1 saying so (the `finally` blocks of the caller run);
    otherwise prints a SKIPPED line, records it, and returns so the caller skips `what`."""
    note = "SKIPPED %s: %s" % (what, why)
    if no_skip():
        raise SystemExit("%s; %s=1 (CI) requires it to run" % (note, NO_SKIP))
    print(note, flush=True)
    record_skip(note)


def port_free(port):
    """Whether `port` can be bound on 127.0.0.1 right now."""
    if not 0 < port < 65536:
        return False
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port(also=(), avoid=()):
    """A loopback port that was free a moment ago (another process may take it first). `also`:
    offsets from it that must be free too (Redis Cluster's bus port at +10000); `avoid`: ports
    not to return."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid and all(port_free(port + offset) for offset in also):
            return port
    raise RuntimeError("no free loopback port found")


class Resp:
    """One connection. `read` gives simple strings as str, bulk strings as bytes, integers,
    arrays as lists and nil as None; an error reply raises RuntimeError with its text."""

    def __init__(self, port, timeout=120):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(max(1 << 20, n + 2 - len(self.buf)))
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.send(*args)
        return self.read()

    def close(self):
        self.sock.close()


def percentile(ordered, q):
    """The `q` quantile (0 to 1) of the sorted, non-empty list `ordered`: its element at index
    q * len, the last one for q = 1."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def running(proc):
    """Whether `proc` (a Popen, a process id, or None for "not watched") still runs; a zombie
    does not."""
    if proc is None:
        return True
    if hasattr(proc, "poll"):
        return proc.poll() is None
    try:
        with open("/proc/%d/stat" % proc) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_ready(port, proc=None, seconds=30):
    """Waits until the server on `port` answers PING and is done loading its data (PING may
    answer -LOADING, or +PONG while INFO persistence still says `loading:1`). Raises
    RuntimeError when `proc` (see `running`) exits first or `seconds` pass."""
    deadline = time.time() + seconds
    while True:
        try:
            c = Resp(port, 5)
            try:
                if c.call("PING") == "PONG" and b"loading:1" not in c.call("INFO", "persistence"):
                    return
            finally:
                c.close()
        except OSError:
            pass
        except RuntimeError as e:  # -LOADING: the dataset is still being read
            if "LOADING" not in str(e):
                raise
        if not running(proc):
            raise RuntimeError("the server for port %d exited before answering PING" % port)
        if time.time() > deadline:
            raise RuntimeError("nothing answered PING on port %d within %g s" % (port, seconds))
        time.sleep(0.05)


def serve_argv(binary, *extra):
    """The command line of `bloomgate serve` for `Server`: BINARY serve --port P --dir D EXTRA."""
    return lambda port, d: [binary, "serve", "--port", str(port), "--dir", d, *extra]


def gate_info(port, timeout=30):
    """GATE.INFO of the gate served on `port` as a dict of str to str or int."""
    c = Resp(port, timeout)
    try:
        flat = c.call("GATE.INFO")
    finally:
        c.close()
    return {_text(k): _text(v) for k, v in zip(flat[::2], flat[1::2])}


def _text(v):
    """A bulk string reply as str; any other reply as it is."""
    return v.decode() if isinstance(v, bytes) else v


def gate_drained(ports, seconds=30, poll=0.1):
    """Waits (at most `seconds` in all) until the gates on `ports` have committed their record
    backlog (GATE.INFO's `record_backlog` is 0)."""
    deadline = time.time() + seconds
    for port in ports:
        while int(gate_info(port)["record_backlog"]) > 0 and time.time() < deadline:
            time.sleep(poll)


def close_all(parts, scratch, keep=False):
    """Closes each of `parts` (anything with `close()`; None for one never started), then removes
    the directory `scratch`, or with `keep` says where it was kept."""
    for part in parts:
        if part:
            part.close()
    if keep:
        print("kept %s" % scratch)
    else:
        shutil.rmtree(scratch, ignore_errors=True)


GOPATH = "/usr/share/gocode"


def build_gatetier(scratch):
    """Builds the Go gate client examples/go/gatetier (Debian's redigo from GOPATH, no module
    download) into `scratch`; returns its path. Raises RuntimeError with the compiler's output
    when Go, redigo or the build fails."""
    redigo = os.path.join(GOPATH, "src/github.com/gomodule/redigo/redis")
    if not shutil.which("go") or not os.path.isdir(redigo):
        raise RuntimeError("Go and Debian's redigo are needed (golang-go, golang-github-gomodule-redigo-dev: "
                           ".ci/setup)")
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH, GOCACHE=os.path.join(scratch, "gocache"), GOFLAGS="")
    binary = os.path.join(scratch, "gatetier")
    out = subprocess.run(["go", "build", "-o", binary, "./examples/go/gatetier"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError("go build: %s%s" % (out.stdout, out.stderr))
    return binary


def redis_argv(binary, module=None, *extra):
    """The command line of a redis-server for `Server`: loopback only, no persistence of its own
    (EXTRA may turn it on: later options win), `module` loaded when given."""
    def argv(port, d):
        out = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
               "--appendonly", "no"]
        return out + (["--loadmodule", module] if module else []) + list(extra)
    return argv


class Server:
    """A server process on a free loopback port. `argv(port, dir)` gives its command line
    (`serve_argv`, `redis_argv`); it runs in directory `dir` (default: a new temporary one,
    removed on close) with its output in `dir`/server.log, and once started it answers PING and
    has loaded its data."""

    def __init__(self, argv, dir=None, prefix="bloomgate-", seconds=60):
        self.port = free_port()
        self.owns_dir = dir is None
        self.dir = dir or tempfile.mkdtemp(prefix=prefix)
        self.argv = argv(self.port, self.dir)
        self.seconds = seconds
        self.proc = self.log = None
        self.start()

    def start(self):
        """Starts the process (again, after `stop`: same port, same directory) and waits until it
        is ready; on failure closes this server and raises RuntimeError with the log's end."""
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_ready(self.port, self.proc, self.seconds)
        except RuntimeError as e:
            tail = self.tail()
            self.close("kill")
            raise RuntimeError("%s; its log ends:\n%s" % (e, tail)) from None

    def tail(self, size=2000):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                return f.read()[-size:].decode(errors="replace")
        except OSError:
            return ""

    def status(self, field):
        """A figure of /proc/PID/status in bytes (VmRSS, VmHWM, ...), 0 when absent."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, how="shutdown", seconds=30):
        """Stops the process by `how` — "shutdown" (SHUTDOWN NOSAVE), "terminate" (SIGTERM) or
        "kill" (SIGKILL); SIGKILL after `seconds` if it is still running — and returns its exit
        status."""
        if self.proc.poll() is None:
            if how == "shutdown":
                try:
                    Resp(self.port, 5).send("SHUTDOWN", "NOSAVE")
                except OSError:
                    pass
            elif how == "terminate":
                self.proc.terminate()
            else:
                self.proc.kill()
            try:
                self.proc.wait(seconds)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()
            self.log = None
        return self.proc.returncode

    def close(self, how="shutdown"):
        """Stops the process (see `stop`) if it runs, then removes the directory if it made it."""
        if self.proc is not None:
            self.stop(how)
        if self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


def start_serve(binary, prefix="bloomgate-", tries=5):
    """`bloomgate serve` from `binary` on a free port, as a `Server` (another process may take
    the port first: `tries` attempts); exits the script when none starts."""
    for _ in range(tries):
        try:
            return Server(serve_argv(binary), prefix=prefix, seconds=30)
        except RuntimeError as e:
            print(e)
    sys.exit("could not start bloomgate serve")


def serve_unless_port(binary, port, prefix="bloomgate-"):
    """(server, port): with a `port`, no server of our own (the caller talks to one already
    running there); without, `bloomgate serve` started by `start_serve` (the caller closes it)."""
    if port is not None:
        return None, port
    server = start_serve(binary, prefix)
    return server, server.port


def serve_from_args(prefix):
    """`serve_unless_port` for a smoke script's own arguments: `--bin` (the `bloomgate` binary,
    default target/release/bloomgate) and `--port` (a server already running there)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join("target", "release", "bloomgate"))
    ap.add_argument("--port", type=int)
    args = ap.parse_args()
    return serve_unless_port(args.bin, args.port, prefix)


# The smoke scripts' checks: each one printed, failures kept for `finish`.
failures = []


def check(name, got, want):
    """Records one check: `got` must equal `want`."""
    if got != want:
        failures.append(f"{name}: got {got!r}, want {want!r}")
        print(f"FAIL {name}: got {got!r}, want {want!r}")
    else:
        print(f"ok   {name}")


def finish(passed):
    """Ends a smoke script: exit status 1 with the failure count, else prints `passed`."""
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print(passed)


def postgres_bin_dir():
    """The directory holding `initdb` and `pg_ctl`: Debian's newest /usr/lib/postgresql/N/bin
    (Debian does not put them on PATH), else the one on PATH; None if PostgreSQL is missing."""
    versions = []
    try:
        for entry in os.listdir("/usr/lib/postgresql"):
            bin_dir = os.path.join("/usr/lib/postgresql", entry, "bin")
            if entry.isdigit() and os.path.isfile(os.path.join(bin_dir, "initdb")):
                versions.append((int(entry), bin_dir))
    except OSError:
        pass
    if versions:
        return max(versions)[1]
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb and shutil.which("pg_ctl") else None


class Postgres:
    """A throwaway PostgreSQL server, as the Rust tests' testkit starts one: `initdb` in a scratch
    directory, `pg_ctl start` on a free 127.0.0.1 port (no Unix socket, trust authentication,
    fsync off); `close` stops it (`-m fast`) and removes the directory. PostgreSQL refuses to run
    as root: as root the server runs as the `postgres` user (else `nobody`) through `runuser`.
    `url` connects as the superuser `bloomgate` to the database `postgres`."""

    SUPERUSER = "bloomgate"

    def __init__(self, bin_dir=None, seconds=60):
        self.bin = bin_dir or postgres_bin_dir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL (initdb, pg_ctl) is not installed")
        self.seconds = seconds
        self.dir = tempfile.mkdtemp(prefix="bloomgate-pg-")
        self.user = None
        if os.geteuid() == 0:
            for user in ("postgres", "nobody"):
                if subprocess.run(["id", user], capture_output=True).returncode == 0:
                    self.user = user
                    break
            else:
                raise RuntimeError("running as root, and neither a postgres nor a nobody user exists")
            shutil.chown(self.dir, self.user)
        self.data = os.path.join(self.dir, "data")
        self.running = False
        try:
            self._run("initdb", "-D", self.data, "-U", self.SUPERUSER, "--auth=trust", "-E", "UTF8",
                      "--no-sync")
            for _ in range(5):  # the port can be taken between free_port and the server's bind
                self.port = free_port()
                try:
                    self.start()
                    break
                except RuntimeError as e:
                    if "could not bind" not in str(e) and "already in use" not in str(e):
                        raise
            else:
                raise RuntimeError("PostgreSQL did not start: no free port in five tries")
        except BaseException:
            self.close()
            raise
        self.url = "postgres://%s@127.0.0.1:%d/postgres" % (self.SUPERUSER, self.port)

    def _run(self, program, *args):
        argv = [os.path.join(self.bin, program)] + list(args)
        if self.user:
            # By path too: runuser lives in /usr/sbin, which a minimal PATH (the wheel check's
            # clean environment) leaves out.
            runuser = shutil.which("runuser") or next(
                (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.path.exists(p)), "runuser")
            argv = [runuser, "-u", self.user, "--"] + argv
        # The scratch directory as working directory: runuser keeps ours, which the server's
        # user may not be allowed to read.
        out = subprocess.run(argv, cwd=self.dir, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("%s failed: %s%s" % (program, out.stdout, out.stderr))
        return out.stdout

    def start(self):
        """Starts the (stopped) server on its port; RuntimeError with its log if it does not."""
        log = os.path.join(self.dir, "server.log")
        options = "-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories='' -c fsync=off" \
            % self.port
        try:
            self._run("pg_ctl", "-D", self.data, "-l", log, "-w", "-t", str(self.seconds),
                      "-o", options, "start")
        except RuntimeError as e:
            try:
                with open(log, errors="replace") as f:
                    tail = f.read()[-2000:]
            except OSError:
                tail = ""
            raise RuntimeError("PostgreSQL did not start: %s\n%s" % (e, tail)) from None
        self.running = True

    def stop(self):
        """Stops the server (`pg_ctl stop -m fast`); the data stays."""
        if self.running:
            self.running = False
            self._run("pg_ctl", "-D", self.data, "-w", "-t", str(self.seconds), "-m", "fast", "stop")

    def close(self):
        """Stops the server and removes its directory."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


class Cluster:
    """A Redis Cluster of `masters` masters with `replicas` replicas each: redis-server processes
    (`binary`, loading `module`) on loopback ports, each in its own directory under `root` with
    its log there, created with `redis-cli --cluster create` and ready (every slot covered, every
    node agreeing) when the constructor returns. `kill9(port)` and `start(port)` stop and bring
    back one node (same port, same directory: it rejoins); `close` stops them all."""

    def __init__(self, binary, module, root, masters=3, replicas=1, node_timeout_ms=2000,
                 extra=(), seconds=60):
        self.binary, self.module, self.root = binary, module, root
        self.node_timeout_ms = node_timeout_ms
        self.extra = list(extra)
        self.procs = {}
        count = masters * (1 + replicas)
        taken = []
        for _ in range(count):  # each port's bus port (+10000) must be free too
            taken.append(free_port(also=(10000,), avoid=taken + [p + 10000 for p in taken]))
        self.ports = taken
        try:
            for port in self.ports:
                self.start(port)
            out = subprocess.run(["redis-cli", "--cluster", "create"]
                                 + ["127.0.0.1:%d" % p for p in self.ports]
                                 + ["--cluster-replicas", str(replicas), "--cluster-yes"],
                                 capture_output=True, text=True, timeout=seconds)
            if out.returncode != 0:
                raise RuntimeError("redis-cli --cluster create failed: %s%s"
                                   % (out.stdout[-1500:], out.stderr[-1500:]))
            self.wait_ok(seconds)
        except BaseException:
            self.close()
            raise

    def start(self, port):
        """Starts (or restarts) the node on `port` and waits until it answers PING."""
        d = os.path.join(self.root, "node-%d" % port)
        os.makedirs(d, exist_ok=True)
        argv = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--save", "", "--appendonly", "no", "--logfile", os.path.join(d, "redis.log"),
                "--loadmodule", self.module] + self.extra
        self.procs[port] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(port, self.procs[port], 30)

    def kill9(self, port):
        proc = self.procs.pop(port)
        proc.kill()
        proc.wait()

    def call(self, port, *args):
        c = Resp(port, 10)
        try:
            return c.call(*args)
        finally:
            c.close()

    def nodes(self, port=None):
        """CLUSTER NODES as seen by `port` (default: any live node):
        {port: (id, "master" or "replica", master id, flags)}."""
        port = port or next(iter(self.procs))
        text = self.call(port, "CLUSTER", "NODES")
        text = text.decode() if isinstance(text, bytes) else text
        out = {}
        for line in text.strip().splitlines():
            f = line.split()
            node_port = int(f[1].split("@")[0].rsplit(":", 1)[1])
            flags = f[2].split(",")
            out[node_port] = (f[0], "master" if "master" in flags else "replica", f[3], flags)
        return out

    def masters(self):
        """Ports of the live masters that hold slots (per a live node's view)."""
        view = self.nodes()
        return sorted(p for p, v in view.items()
                      if v[1] == "master" and "fail" not in v[3] and p in self.procs)

    def wait_ok(self, seconds=60):
        """Until every live node says cluster_state:ok and they agree on every node's role."""
        deadline = time.time() + seconds
        last = None
        while time.time() < deadline:
            try:
                states = [self.call(p, "CLUSTER", "INFO") for p in self.procs]
                views = [self.nodes(p) for p in self.procs]
                ok = all(b"cluster_state:ok" in s for s in states)
                roles = [{q: v[1] for q, v in view.items() if q in self.procs} for view in views]
                if ok and all(r == roles[0] for r in roles):
                    return
                last = "states or roles differ"
            except (OSError, RuntimeError) as e:
                last = e
            time.sleep(0.1)
        raise RuntimeError("cluster not ok within %g s (%s)" % (seconds, last))

    def seeds(self):
        """`HOST:PORT,...` of the first two nodes, for a `redis+cluster://` URL."""
        return ",".join("127.0.0.1:%d" % p for p in self.ports[:2])

    def log_tail(self, port, size=1500):
        try:
            with open(os.path.join(self.root, "node-%d" % port, "redis.log"), "rb") as f:
                return f.read()[-size:].decode(errors="replace")
        except OSError:
            return ""

    def close(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait()
        self.procs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def node_redis():
    """(NODE_PATH, None): where node-redis (the `redis` package, v5) can be required from,
    installed with npm into target/node-redis once; (None, why) when node or npm is missing.
    Raises RuntimeError when npm fails."""
    if not shutil.which("node") or not shutil.which("npm"):
        return None, "node and npm are not installed"
    prefix = os.path.join(ROOT, "target", "node-redis")
    modules = os.path.join(prefix, "node_modules")
    if not os.path.isdir(os.path.join(modules, "redis")):
        os.makedirs(prefix, exist_ok=True)
        argv = ["npm", "install", "--no-save", "--no-audit", "--no-fund", "--prefix", prefix, "redis@^5"]
        print("$ " + " ".join(argv))
        if subprocess.run(argv).returncode != 0:
            raise RuntimeError("npm install redis failed")
    return modules, None


def main():
    ap = argparse.ArgumentParser(description="free loopback ports and waiting for a server, "
                                             "for shell scripts")
    sub = ap.add_subparsers(dest="what", required=True)
    ports = sub.add_parser("free-port", help="print N distinct free loopback ports, one a line")
    ports.add_argument("n", nargs="?", type=int, default=1)
    wait = sub.add_parser("wait", help="wait until PORT answers PING and is done loading")
    wait.add_argument("port", type=int)
    wait.add_argument("--pid", type=int, help="fail as soon as this process has exited")
    wait.add_argument("--seconds", type=float, default=30)
    skip = sub.add_parser("skip", help="a check that cannot run here: fails under "
                                       "BLOOMGATE_NO_SKIP=1, else says SKIPPED and records it")
    skip.add_argument("check")
    skip.add_argument("why")
    args = ap.parse_args()
    if args.what == "skip":
        skip_or_fail(args.check, args.why)
        return 0
    if args.what == "free-port":
        taken = []
        for _ in range(args.n):
            taken.append(free_port(avoid=taken))
        print("\n".join(map(str, taken)))
        return 0
    try:
        wait_ready(args.port, args.pid, args.seconds)
    except RuntimeError as e:
        print("bgtest wait: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
