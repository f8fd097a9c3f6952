#!/usr/bin/env python3
"""Idle memory: the broker's resident memory per idle connection, at several counts.

Starts ``minikafka`` (``$MINIKAFKA_BIN``, else the newest build) and opens idle connections in
steps (``--steps``, cumulative). Half of each step's connections never send anything; the other
half send one ApiVersions request, read the answer and then stay idle (a client between
requests). After each step the broker's ``VmRSS`` and ``/proc/PID/smaps_rollup``'s anonymous
memory are read once the count settled; the figure is the growth per connection from the step
before (the slope, so the broker's fixed cost and the allocator's first arenas drop out).
Figures are reported, never asserted: it is a measurement, not a test (not in ``.ci/run``).

    MINIKAFKA_BIN=target/release/minikafka python3 tests/soak/idle_memory.py \\
        [--steps 2000,4000,8000,16000] [--override num.shards=2]

Raises its own open-files limit and the broker's (setrlimit before exec) as far as the hard
limit allows, and says the limit.
"""

import argparse
import pathlib
import resource
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from soak_broker import Broker, binary, rss_kib  # noqa: E402


def api_versions(correlation_id):
    header = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"idle"
    return struct.pack(">i", len(header)) + header


def read_frame(sock):
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def anonymous_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1])
    return 0


def settled_rss(pid):
    """VmRSS once two readings 0.5 s apart agree within 64 KiB (at most 5 s)."""
    last = rss_kib(pid)
    for _ in range(10):
        time.sleep(0.5)
        now = rss_kib(pid)
        if abs(now - last) <= 64:
            return now
        last = now
    return last


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="2000,4000,8000,16000",
                        help="cumulative idle connection counts (comma-separated)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else 1 << 20
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    if max(steps) + 64 > limit:
        sys.exit(f"open-files hard limit {limit} is below {max(steps) + 64}")

    def broker_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="minikafka-idle-"))
    broker = Broker(workdir / "data", workdir / "broker.log",
                    overrides=["connections.max.idle.ms=3600000", *args.override],
                    preexec_fn=broker_limit)
    if not broker.start_for_setup():
        return 2
    pid = broker.pid
    print(f"binary {binary()}; open-files limit {limit} (ours and the broker's)")
    held = []
    try:
        warm = socket.create_connection(("127.0.0.1", broker.port))
        warm.sendall(api_versions(0))
        read_frame(warm)
        rss0, anon0 = settled_rss(pid), anonymous_kib(pid)
        print(f"| idle connections | VmRSS (MiB) | anonymous (MiB) | KiB per connection, "
              f"VmRSS slope | anonymous slope |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| 0 | {rss0 / 1024:.1f} | {anon0 / 1024:.1f} | | |")
        count, rss_prev, anon_prev = 0, rss0, anon0
        for target in steps:
            while len(held) < target:
                s = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
                if len(held) % 2:
                    s.sendall(api_versions(len(held)))
                    read_frame(s)
                held.append(s)
            rss, anon = settled_rss(pid), anonymous_kib(pid)
            added = target - count
            print(f"| {target} | {rss / 1024:.1f} | {anon / 1024:.1f} | "
                  f"{(rss - rss_prev) / added:.1f} | {(anon - anon_prev) / added:.1f} |")
            count, rss_prev, anon_prev = target, rss, anon
        print(f"overall: {(rss_prev - rss0) / count:.1f} KiB VmRSS per idle connection "
              f"({count} connections)")
        if not broker.alive():
            print("the broker died")
            return 1
    finally:
        for s in held:
            s.close()
        broker.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
