#!/usr/bin/env python3
"""Log compaction figures: bytes before and after on an overwrite workload, cleaner
throughput, and produce latency (p50/p99, librdkafka via confluent-kafka) with the cleaner off
and on.

Usage: benches/compaction_figures.py [--bin target/release/minikafka] [--records 200000]
       [--keys 1000] [--value-bytes 100] [--throttle BYTES_PER_S]

Two runs on fresh data directories, the same workload each: `log.cleaner.enable=false`
(bytes before: the log as written) and `log.cleaner.enable=true` with a 200 ms backoff
(bytes after, once the size is stable; cleaner throughput = the I/O bytes over the elapsed
time the broker logs for each cleaning). The topic is compacted, `segment.bytes` 1 MiB,
`min.cleanable.dirty.ratio` 0.1, so the cleaner runs while the producer writes. Latency is
measured per record from send to delivery report, acks=all, linger.ms=1: the producer sends as
fast as it can, so it is mostly queueing (depth over throughput), and the cleaner running on
the partition's shard shows up as lost throughput. `--throttle` adds a third run with the
cleaner limited to that many bytes per second (`log.cleaner.io.max.bytes.per.second`). Run it
on a quiet machine: it measures, it asserts nothing.
"""

import argparse
import json
import os
import pathlib
import re
import socket
import statistics
import subprocess
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = pathlib.Path(__file__).resolve().parents[1]
TOPIC = "figures"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, workdir, cleaner, throttle=None):
    port = free_port()
    data = workdir / "data"
    log = open(workdir / "broker.log", "wb")
    proc = subprocess.Popen(
        [binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={data}",
         "--override", f"log.cleaner.enable={'true' if cleaner else 'false'}",
         "--override", "log.cleaner.backoff.ms=200"]
        + (["--override", f"log.cleaner.io.max.bytes.per.second={throttle}"] if throttle else []),
        stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("broker did not start")
            time.sleep(0.05)
    return proc, port, data, workdir / "broker.log"


def log_bytes(data):
    return sum(p.stat().st_size for p in (data / f"{TOPIC}-0").glob("*.log"))


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run(binary, args, cleaner, throttle=None):
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, data, broker_log = start(binary, pathlib.Path(tmp), cleaner, throttle)
        try:
            bootstrap = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topic = NewTopic(TOPIC, 1, 1, config={
                "cleanup.policy": "compact", "segment.bytes": str(1 << 20),
                "min.cleanable.dirty.ratio": "0.1",
            })
            for f in admin.create_topics([topic]).values():
                f.result(30)
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
            latencies = []
            value = b"v" * args.value_bytes

            def report(sent_at):
                return lambda err, _msg: latencies.append(
                    None if err else time.perf_counter() - sent_at)

            started = time.perf_counter()
            for i in range(args.records):
                key = f"key-{i % args.keys}".encode()
                while True:
                    try:
                        producer.produce(TOPIC, value, key, partition=0,
                                         on_delivery=report(time.perf_counter()))
                        break
                    except BufferError:
                        producer.poll(0.01)
                producer.poll(0)
            producer.flush(60)
            produce_s = time.perf_counter() - started
            ok = [x for x in latencies if x is not None]
            # Let the cleaner finish: the size stable for 2 s (bounded).
            stable_since, last, deadline = time.monotonic(), log_bytes(data), time.monotonic() + 60
            while time.monotonic() - stable_since < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
                now = log_bytes(data)
                if now != last:
                    last, stable_since = now, time.monotonic()
            io_bytes = elapsed_us = cleanings = 0
            for line in open(broker_log, errors="replace"):
                if "log cleaned" in line and TOPIC in line:
                    cleanings += 1
                    io_bytes += int(re.search(r"io_bytes=(\d+)", line).group(1))
                    elapsed_us += int(re.search(r"elapsed_us=(\d+)", line).group(1))
            return {
                "cleaner": cleaner,
                "throttle_bytes_per_s": throttle,
                "records": args.records,
                "failed": len(latencies) - len(ok),
                "produce_records_per_s": round(args.records / produce_s),
                "latency_p50_ms": round(statistics.median(ok) * 1000, 2),
                "latency_p99_ms": round(percentile(ok, 0.99) * 1000, 2),
                "log_bytes_at_end": log_bytes(data),
                "cleanings": cleanings,
                "cleaner_io_mb_per_s": round(io_bytes / elapsed_us, 1) if elapsed_us else None,
            }
        finally:
            proc.terminate()
            proc.wait(20)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(REPO / "target" / "release" / "minikafka"))
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--throttle", type=int, default=None)
    args = parser.parse_args()
    off = run(args.bin, args, cleaner=False)
    on = run(args.bin, args, cleaner=True)
    runs = {"load_average": os.getloadavg(), "binary": args.bin,
            "cleaner_off": off, "cleaner_on": on}
    if args.throttle:
        runs["cleaner_throttled"] = throttled = run(args.bin, args, True, args.throttle)
    print(json.dumps(runs, indent=2))
    print(f"bytes before {off['log_bytes_at_end']} -> after {on['log_bytes_at_end']}; "
          f"p99 {off['latency_p99_ms']} ms (cleaner off) vs {on['latency_p99_ms']} ms (on); "
          f"cleaner {on['cleaner_io_mb_per_s']} MB/s over {on['cleanings']} cleanings "
          f"(load {os.getloadavg()[0]:.1f})")
    if args.throttle:
        print(f"throttled to {args.throttle} B/s: p99 {throttled['latency_p99_ms']} ms, "
              f"bytes after {throttled['log_bytes_at_end']}")


if __name__ == "__main__":
    main()
