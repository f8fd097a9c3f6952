#!/usr/bin/env python3
"""Flood: idle and slowloris connections, pipelining, and clients that never read.

Runs the ``minikafka`` binary (``$MINIKAFKA_BIN``, else the newest build under the cargo
target dir) and measures, with raw Kafka frames over TCP (figures are reported, not asserted,
except where a bound is the point):

1. Baseline: a normal client sends ``--requests`` Metadata requests one at a time on one
   connection; the p50/p99 round trip, and the broker's resident memory (VmRSS).
2. Flood: a helper process opens ``--idle`` idle connections and ``--slowloris`` connections
   that each send a request one byte per second (answered when it completes, then another).
   With all of them open, the normal client measures again: p99 loaded / p99 unloaded is the
   figure; the broker's RSS growth divided by the connections is the memory per connection.
   Checked: the normal client is served, the slowloris requests are answered, the broker lives.
3. Pipelining: ``--pipeline`` ApiVersions requests in one write (the in-flight limit is 32):
   checked that every one is answered, in order; the time is reported.
4. Never reading: ``--greedy`` clients write ApiVersions requests without ever reading the
   answers until their writes stall (the broker stops reading them: back-pressure). Checked
   that every one stalls, and the broker's RSS growth is reported (it must stay below
   ``GREEDY_RSS_LIMIT_MIB``); the normal client is still served meanwhile.

The test process raises its own open-files limit (and the broker's, with setrlimit before
exec) to hold the connections; ``--idle 10000 --slowloris 1000`` needs about 11,100 of each.
Exit status 0: every check passed; 1: a check failed; 2: setup error.
"""

import argparse
import multiprocessing
import os
import pathlib
import resource
import selectors
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from soak_broker import Broker, binary, cpu_seconds, peak_rss_kib, report, rss_kib  # noqa: E402

GREEDY_RSS_LIMIT_MIB = 512
STALL_LIMIT_BYTES = 64 * 1024 * 1024


def frame(api_key, version, correlation_id, body=b""):
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"flood"
    return struct.pack(">i", len(header) + len(body)) + header + body


def api_versions(correlation_id):
    return frame(18, 0, correlation_id)


def metadata(correlation_id):
    return frame(3, 1, correlation_id, struct.pack(">i", -1))  # v1, all topics


def read_response(sock):
    """Reads one response frame; returns its correlation id."""
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    body = recv_exact(sock, size)
    return struct.unpack(">i", body[:4])[0]


def recv_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        data += chunk
    return bytes(data)


def round_trips(port, n):
    """n Metadata round trips on one connection; returns the latencies in ms."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    try:
        for i in range(n):
            began = time.perf_counter()
            sock.sendall(metadata(i))
            if read_response(sock) != i:
                raise RuntimeError("normal client: answer out of order")
            times.append((time.perf_counter() - began) * 1000)
    finally:
        sock.close()
    return times


def p(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def hold_flood(port, idle, slowloris, ready, stop, results):
    """Child process: holds the idle and slowloris connections until `stop` is set."""
    raise_nofile(idle + slowloris + 64)
    held, slow = [], []
    try:
        for _ in range(idle):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        for _ in range(slowloris):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.setblocking(False)
            slow.append(s)
    except OSError as e:
        results.put(("error", f"opening connections: {e} after {len(held) + len(slow)}"))
        ready.set()
        return
    ready.set()
    pending = {s: api_versions(1) for s in slow}
    position = {s: 0 for s in slow}
    inbox = {s: b"" for s in slow}
    answered = 0
    sent_bytes = 0
    closed = 0
    while not stop.is_set():
        tick = time.monotonic()
        for s in slow:
            if s.fileno() == -1:
                continue
            try:
                data = pending[s]
                if position[s] < len(data):
                    s.send(data[position[s]:position[s] + 1])
                    position[s] += 1
                    sent_bytes += 1
                chunk = s.recv(65536)
                if not chunk:
                    closed += 1
                    s.close()
                    continue
                inbox[s] += chunk
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
                s.close()
                continue
            buf = inbox[s]
            if len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                inbox[s] = buf[4 + struct.unpack(">i", buf[:4])[0]:]
                answered += 1
                position[s] = 0  # the next request, one byte a second again
        stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))
    idle_closed = 0
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                idle_closed += 1
        except BlockingIOError:
            pass
        except OSError:
            idle_closed += 1
    results.put(("ok", {"slowloris requests answered": answered, "slowloris bytes sent": sent_bytes,
                        "slowloris connections closed by the broker": closed,
                        "idle connections closed by the broker": idle_closed}))
    for s in held + slow:
        s.close()


def raise_nofile(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        if hard < needed:
            raise SystemExit(f"setup: open-files hard limit {hard} is below the {needed} needed")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def pipelined(port, n):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        began = time.monotonic()
        sock.sendall(b"".join(api_versions(i) for i in range(n)))
        for i in range(n):
            got = read_response(sock)
            if got != i:
                raise RuntimeError(f"pipelined answer {i} has correlation id {got}")
        return time.monotonic() - began
    finally:
        sock.close()


def greedy(port, clients):
    """Clients that write and never read; returns the bytes each got into the kernel before stalling."""
    socks = []
    written = []
    request = api_versions(0) * 64
    for _ in range(clients):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.setblocking(False)
        socks.append(s)
    sel = selectors.DefaultSelector()
    for s in socks:
        total = 0
        stalled_since = None
        while total < STALL_LIMIT_BYTES:
            try:
                total += s.send(request)
                stalled_since = None
            except BlockingIOError:
                # Stalled: the broker stopped reading. Give it a moment to read more.
                if stalled_since is None:
                    stalled_since = time.monotonic()
                elif time.monotonic() - stalled_since > 0.5:
                    break
                sel.register(s, selectors.EVENT_WRITE)
                sel.select(0.2)
                sel.unregister(s)
        written.append(total)
    return socks, written


def run(args):
    raise_nofile(args.idle + args.slowloris + args.greedy + 256)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="minikafka-flood-"))
    log_path = workdir / "broker.log"
    broker_nofile = args.idle + args.slowloris + args.greedy + 1024

    def broker_limit():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(broker_nofile, hard)), hard))

    broker = Broker(workdir / "data", log_path, overrides=args.override, preexec_fn=broker_limit)
    if not broker.start_for_setup():
        return 2
    proc, port = broker.proc, broker.port
    figures = {"binary": binary(), "load average at start": load_average()}
    failures = []
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    try:
        round_trips(port, 200)  # warm up
        base = round_trips(port, args.requests)
        rss0 = rss_kib(proc.pid)
        figures["unloaded Metadata round trip p50 / p99 (ms)"] = f"{p(base, 0.5):.2f} / {p(base, 0.99):.2f}"
        figures["broker RSS before the flood (MiB)"] = round(rss0 / 1024, 1)

        ready, results = ctx.Event(), ctx.Queue()
        holder = ctx.Process(target=hold_flood, args=(port, args.idle, args.slowloris, ready, stop, results))
        opened = time.monotonic()
        holder.start()
        ready.wait(600)
        figures["seconds to open the flood's connections"] = round(time.monotonic() - opened, 1)
        time.sleep(2)
        loaded = round_trips(port, args.requests)
        rss1 = rss_kib(proc.pid)
        n = args.idle + args.slowloris
        figures[f"loaded ({args.idle} idle + {args.slowloris} slowloris) p50 / p99 (ms)"] = \
            f"{p(loaded, 0.5):.2f} / {p(loaded, 0.99):.2f}"
        figures["p99 loaded / p99 unloaded"] = round(p(loaded, 0.99) / p(base, 0.99), 2)
        figures["broker RSS with the flood (MiB)"] = round(rss1 / 1024, 1)
        figures["broker RSS per flood connection (KiB)"] = round((rss1 - rss0) / max(1, n), 1)
        figures["broker descriptors with the flood"] = len(os.listdir(f"/proc/{proc.pid}/fd"))
        if args.hold_s > 0:
            time.sleep(args.hold_s)
        stop.set()
        holder.join(60)
        kind, held = results.get(timeout=30)
        if kind != "ok":
            failures.append(held)
        else:
            figures.update(held)
            if args.slowloris and held["slowloris bytes sent"] >= len(api_versions(1)) * args.slowloris \
                    and held["slowloris requests answered"] == 0:
                failures.append("no slowloris request was answered")

        took = pipelined(port, args.pipeline)
        figures[f"{args.pipeline} ApiVersions pipelined in one write: all answered in order (s)"] = round(took, 2)

        rss2 = rss_kib(proc.pid)
        cpu_greedy = cpu_seconds(proc.pid)
        socks, written = greedy(port, args.greedy)
        rss3 = rss_kib(proc.pid)
        figures[f"{args.greedy} clients never reading: bytes written before the writes stalled (max)"] = max(written)
        figures["broker RSS growth with the clients that never read (MiB)"] = round((rss3 - rss2) / 1024, 1)
        if max(written) >= STALL_LIMIT_BYTES:
            failures.append(f"a client that never reads wrote {STALL_LIMIT_BYTES} bytes without stalling")
        if (rss3 - rss2) / 1024 > GREEDY_RSS_LIMIT_MIB:
            failures.append(f"broker RSS grew {(rss3 - rss2) / 1024:.0f} MiB for clients that never read")
        # The broker goes on answering until the kernel's socket buffers (megabytes per
        # connection on loopback) hold all it may write; its CPU falls as they fill. Measured
        # in 3 s windows until under 5 % of a core (at most a minute).
        settle_began = time.monotonic()
        shares = []
        while time.monotonic() - settle_began < 60:
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(3)
            shares.append((cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0))
            if shares[-1] < 0.05:
                break
        figures["broker CPU after they stalled, 3 s windows (share of one core)"] = \
            " ".join(f"{x:.2f}" for x in shares)
        figures["broker CPU seconds from their first write until it settled"] = \
            round(cpu_seconds(proc.pid) - cpu_greedy, 2)
        held = [kernel_held_bytes(port, s.getsockname()[1]) for s in socks]
        if held:
            figures["answers held in the kernel per client that never reads (bytes, min / max)"] = \
                f"{min(held)} / {max(held)}"
        during = round_trips(port, 500)
        figures["normal client p99 beside them (ms)"] = round(p(during, 0.99), 2)
        for s in socks:
            s.close()
        figures["broker peak RSS (VmHWM, MiB)"] = round(peak_rss_kib(proc.pid) / 1024, 1)
        if proc.poll() is not None:
            failures.append(f"broker exited with {proc.returncode}")
    except (OSError, RuntimeError, ConnectionError) as e:
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        stop.set()
        broker.kill()
    figures["load average at the end"] = load_average()
    status = report(figures, failures, "the normal client was served through the flood; pipelining "
                    "answered in order; clients that never read were stalled, memory bounded", log_path)
    if status == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


def load_average():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def kernel_held_bytes(broker_port, client_port):
    """Bytes the kernel holds for one loopback connection: the broker end's send queue plus the
    client end's receive queue (``tx_queue`` and ``rx_queue`` of ``/proc/net/tcp``)."""
    held = 0
    for line in pathlib.Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
        tx, rx = (int(x, 16) for x in fields[4].split(":"))
        if (local, remote) == (broker_port, client_port):
            held += tx
        elif (local, remote) == (client_port, broker_port):
            held += rx
    return held


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=10000, help="idle connections (default 10000)")
    parser.add_argument("--slowloris", type=int, default=1000, help="one-byte-a-second connections (default 1000)")
    parser.add_argument("--requests", type=int, default=2000, help="normal client round trips per measurement")
    parser.add_argument("--pipeline", type=int, default=5000, help="requests pipelined in one write")
    parser.add_argument("--greedy", type=int, default=20, help="clients that never read (default 20)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting, e.g. socket.send.buffer.bytes=-1 (repeatable)")
    parser.add_argument("--hold-s", type=float, default=20.0,
                        help="seconds to keep the flood after measuring (slowloris requests complete)")
    args = parser.parse_args()
    sys.exit(run(args))


if __name__ == "__main__":
    main()
