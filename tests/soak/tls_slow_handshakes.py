#!/usr/bin/env python3
"""TLS slow handshakes: thousands of connections trickling a ClientHello into an SSL listener.

Issue 22's "10,000 slow handshakes while other clients keep their p99 within 5x of unloaded",
as a benchmark (figures reported, not asserted). Runs the ``minikafka`` binary
(``$MINIKAFKA_BIN``, else the newest build under the cargo target dir) with a PLAINTEXT and an
SSL listener, its certificate made in a scratch directory with docs/SECURITY.md's ``openssl``
commands, and measures with normal clients sending Metadata one at a time:

1. Unloaded: ``--requests`` round trips on PLAINTEXT and on SSL (Python's ``ssl``, connected
   before the clock starts); p50/p99 of each.
2. Loaded: a helper process holds ``--connections`` connections to the SSL port, each sending a
   real ClientHello one byte every ``--interval-s`` seconds. The broker closes a handshake not
   done within its 10 s bound (``HANDSHAKE_TIMEOUT``); the helper opens another at once, so
   the count stays at ``--connections`` (new connections and timeouts go on throughout). The
   normal clients measure again: p99 loaded / p99 unloaded per listener (the goal: 5x at most).
3. The helper closes its connections; after ``--settle-s`` the next cycle begins. ``--cycles``
   cycles alternate unloaded and loaded on the same broker; the figures are the median
   (min-max) over cycles of each p99 and of each cycle's ratio (a machine whose load drifts
   moves both halves of a cycle alike).

Checked (exit 1 otherwise): the broker lives and the normal clients are served; the helper
could hold the connections. The open-files limit (``ulimit -Hn``) bounds ``--connections``:
the helper and the broker each need one descriptor per connection, plus a few hundred.
Exit status 0: checks passed; 1: a check failed; 2: setup error.
"""

import argparse
import multiprocessing
import os
import pathlib
import resource
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from flood import load_average, metadata, p, raise_nofile, read_response  # noqa: E402
from soak_broker import Broker, binary, cpu_seconds, free_port, report, rss_kib  # noqa: E402


def make_certificates(directory):
    """A CA and the broker's certificate for 127.0.0.1 (docs/SECURITY.md's commands)."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=flood CA")
    openssl("req", *ec, "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost")
    (directory / "broker.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "broker.ext", "-out", "broker.crt")
    (directory / "broker.pem").write_bytes((directory / "broker.key").read_bytes() + (directory / "broker.crt").read_bytes())
    return directory / "broker.pem", directory / "ca.crt"


def client_hello(ca):
    """The bytes of a real TLS ClientHello (Python's ssl, through memory BIOs)."""
    context = ssl.create_default_context(cafile=str(ca))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def round_trips(sock, n):
    """n Metadata round trips on `sock`; the latencies in ms."""
    times = []
    for i in range(n):
        began = time.perf_counter()
        sock.sendall(metadata(i))
        if read_response(sock) != i:
            raise RuntimeError("normal client: answer out of order")
        times.append((time.perf_counter() - began) * 1000)
    return times


def connect(port, ca=None):
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ca is not None:
        sock = ssl.create_default_context(cafile=str(ca)).wrap_socket(sock, server_hostname="localhost")
    return sock


def measure(port, tls_port, ca, n):
    """p50/p99 lists for PLAINTEXT and SSL, each on one connection opened before the clock."""
    out = {}
    for name, sock in (("PLAINTEXT", connect(port)), ("SSL", connect(tls_port, ca))):
        try:
            round_trips(sock, 50)  # warm up
            out[name] = round_trips(sock, n)
        finally:
            sock.close()
    return out


def hold_slow_handshakes(tls_port, count, interval_s, hello, ready, stop, results):
    """Child process: keeps `count` connections trickling `hello` into the SSL port."""
    raise_nofile(count + 64)
    conns = {}  # socket -> bytes of the ClientHello sent

    def open_one():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", tls_port))
        except BlockingIOError:
            pass
        conns[s] = 0

    opened, closed_by_broker, sent = 0, 0, 0
    try:
        for _ in range(count):
            open_one()
            opened += 1
    except OSError as e:
        results.put(("error", f"opening connections: {e} after {opened}"))
        ready.set()
        return
    ready.set()
    while not stop.is_set():
        tick = time.monotonic()
        for s in list(conns):
            try:
                if conns[s] < len(hello):
                    s.send(hello[conns[s]:conns[s] + 1])
                    conns[s] += 1
                    sent += 1
                if s.recv(4096) == b"":
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                # Closed by the broker (its handshake bound) or not yet connected and refused:
                # another takes its place, so the count holds.
                closed_by_broker += 1
                del conns[s]
                s.close()
                try:
                    open_one()
                    opened += 1
                except OSError:
                    pass
        stop.wait(max(0.0, interval_s - (time.monotonic() - tick)))
    results.put(("ok", {"slow handshakes opened in all": opened,
                        "slow handshakes closed by the broker (timeout)": closed_by_broker,
                        "ClientHello bytes trickled": sent}))
    for s in conns:
        s.close()


def run(args):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = args.connections + 256
    if hard < needed:
        print(f"setup: open-files hard limit {hard} is below the {needed} needed; lower --connections")
        return 2
    raise_nofile(needed)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="minikafka-tls-slow-"))
    keystore, ca = make_certificates(workdir)
    tls_port = free_port()
    log_path = workdir / "broker.log"

    def broker_limit():
        s, h = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(s, min(args.connections + 1024, h)), h))

    broker = Broker(workdir / "data", log_path, preexec_fn=broker_limit, overrides=[
        f"ssl.keystore.location={keystore}", "ssl.keystore.type=PEM", *args.override])
    broker.overrides.insert(0, f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{tls_port}")
    if not broker.start_for_setup():
        return 2
    proc, port = broker.proc, broker.port
    figures = {"binary": binary(), "open-files limit (soft / hard)": f"{soft} / {hard}",
               "load average at start": load_average()}
    failures = []
    ctx = multiprocessing.get_context("fork")
    try:
        hello = client_hello(ca)
        cycles = []
        for cycle in range(args.cycles):
            base = measure(port, tls_port, ca, args.requests)
            rss0, cpu0 = rss_kib(proc.pid), cpu_seconds(proc.pid)
            ready, results = ctx.Event(), ctx.Queue()
            stop = ctx.Event()
            holder = ctx.Process(target=hold_slow_handshakes,
                                 args=(tls_port, args.connections, args.interval_s, hello, ready, stop, results),
                                 daemon=True)
            opened = time.monotonic()
            holder.start()
            ready.wait(600)
            time.sleep(args.settle_s)
            loaded = measure(port, tls_port, ca, args.requests)
            descriptors = len(os.listdir(f"/proc/{proc.pid}/fd"))
            rss1 = rss_kib(proc.pid)
            cpu_share = (cpu_seconds(proc.pid) - cpu0) / max(1e-9, time.monotonic() - opened)
            stop.set()
            holder.join(60)
            kind, held = results.get(timeout=30)
            if kind != "ok":
                failures.append(held)
                break
            cycles.append((base, loaded, descriptors, rss1 - rss0, cpu_share, held))
            print(f"cycle {cycle}: " + ", ".join(
                f"{name} p99 {p(base[name], 0.99):.2f} -> {p(loaded[name], 0.99):.2f} ms" for name in base),
                flush=True)
            time.sleep(args.settle_s)

        def spread(values, fmt="{:.2f}"):
            ordered = sorted(values)
            return f"{fmt.format(statistics.median(ordered))} ({fmt.format(ordered[0])}-{fmt.format(ordered[-1])})"

        if cycles:
            figures["cycles"] = len(cycles)
            for name in ("PLAINTEXT", "SSL"):
                figures[f"{name} unloaded p50 / p99 (ms), median (min-max) over cycles"] = \
                    f"{spread([p(c[0][name], 0.5) for c in cycles])} / {spread([p(c[0][name], 0.99) for c in cycles])}"
                figures[f"{name} with {args.connections} slow handshakes p50 / p99 (ms)"] = \
                    f"{spread([p(c[1][name], 0.5) for c in cycles])} / {spread([p(c[1][name], 0.99) for c in cycles])}"
                figures[f"{name} p99 loaded / unloaded per cycle (goal <= 5)"] = \
                    spread([p(c[1][name], 0.99) / p(c[0][name], 0.99) for c in cycles])
            figures["broker descriptors while loaded (max)"] = max(c[2] for c in cycles)
            figures["broker RSS growth with the slow handshakes (MiB)"] = spread([c[3] / 1024 for c in cycles], "{:.0f}")
            figures["broker CPU share while loaded (of one core)"] = spread([c[4] for c in cycles])
            for key in cycles[0][5]:
                figures[f"{key} (per cycle, median)"] = statistics.median(c[5][key] for c in cycles)
        if proc.poll() is not None:
            failures.append(f"broker exited with {proc.returncode}")
    except (OSError, RuntimeError, ConnectionError, ssl.SSLError) as e:
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        broker.kill()
    figures["load average at the end"] = load_average()
    status = report(figures, failures, "the normal clients were served beside the slow handshakes", log_path)
    if status == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10000, help="slow handshakes held (default 10000)")
    parser.add_argument("--interval-s", type=float, default=1.0, help="seconds between two bytes of a ClientHello")
    parser.add_argument("--requests", type=int, default=2000, help="normal client round trips per measurement")
    parser.add_argument("--settle-s", type=float, default=12.0,
                        help="seconds after opening before measuring (past the first handshake timeouts), "
                             "and after closing before the next cycle")
    parser.add_argument("--cycles", type=int, default=3, help="unloaded/loaded cycles (default 3)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting (repeatable)")
    args = parser.parse_args()
    sys.exit(run(args))


if __name__ == "__main__":
    main()
