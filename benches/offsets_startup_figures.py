#!/usr/bin/env python3
"""Startup with a large, mostly-overwritten `__consumer_offsets`, before and after the cleaner
ran: restart time and the records the group coordinators replay.

Usage: benches/offsets_startup_figures.py [--bin target/release/minikafka] [--groups 4]
       [--partitions 4] [--commits 120000] [--segment-bytes 104857600]
       [--segment-ms 2000] [--restarts 3]

One data directory, four phases:
1. Write: the cleaner off (`log.cleaner.enable=false`), `groups` consumer groups commit offsets
   for the same `partitions` partitions of one topic, one OffsetCommit per group and round,
   until `commits` offset records were written (so every key is overwritten
   commits / (groups x partitions) times). Clean shutdown.
2. Before: `restarts` restarts with the cleaner off; each one's time from spawn to the listener
   accepting (coordinators replay before any shard accepts a connection) and the records the
   coordinators replayed (the broker's `group coordinator loaded` lines).
3. Clean: a restart with the cleaner on (200 ms backoff) until `__consumer_offsets`'s size has
   been stable for 3 s (and `segment.ms` has passed, so the cleaner rolled the quiet active
   segments). Clean shutdown.
4. After: as 2.

Only sealed segments are cleaned, so each offsets partition's active segment is replayed whole:
what stays uncleaned is bounded by `offsets.topic.segment.bytes` (Kafka's 100 MiB, the default
here too) and `offsets.topic.segment.ms` (10 minutes by default; 2 s here so the run does not
wait; `--segment-ms 604800000` gives Kafka's 7-day roll, under which nothing is cleaned). It
measures, it asserts nothing; wall-clock times depend on the machine's load (printed).
"""

import argparse
import json
import os
import pathlib
import re
import socket
import subprocess
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = pathlib.Path(__file__).resolve().parents[1]
TOPIC = "committed"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """One broker process on `data`; `started_s` is spawn → listener accepting."""

    def __init__(self, binary, data, log_path, args, cleaner):
        self.port = free_port()
        self.log_path = log_path
        log = open(log_path, "wb")
        spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            [binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
             "--override", f"log.dirs={data}",
             "--override", f"offsets.topic.segment.bytes={args.segment_bytes}",
             "--override", f"offsets.topic.segment.ms={args.segment_ms}",
             "--override", f"log.cleaner.enable={'true' if cleaner else 'false'}",
             "--override", "log.cleaner.backoff.ms=200"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"broker did not start (see {log_path})")
                time.sleep(0.005)
        self.started_s = time.perf_counter() - spawned

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def replayed(self):
        """Records and bytes the coordinators replayed at this start."""
        records = read_bytes = 0
        for line in open(self.log_path, errors="replace"):
            if "group coordinator loaded" in line:
                records += int(re.search(r"records=(\d+)", line).group(1))
                read_bytes += int(re.search(r"bytes=(\d+)", line).group(1))
        return records, read_bytes

    def stop(self):
        self.proc.terminate()
        if self.proc.wait(60) != 0:
            raise RuntimeError(f"broker exited {self.proc.returncode} (see {self.log_path})")


def offsets_bytes(data):
    return sum(p.stat().st_size for p in data.glob("__consumer_offsets-*/*.log"))


def write_commits(broker, args):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
        f.result(30)
    consumers = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"group-{g}",
                           "enable.auto.commit": False}) for g in range(args.groups)]
    rounds = -(-args.commits // (args.groups * args.partitions))
    pending = 0
    for r in range(rounds):
        for c in consumers:
            c.commit(offsets=[TopicPartition(TOPIC, p, r + 1) for p in range(args.partitions)],
                     asynchronous=True)
            pending += 1
        if pending >= 256:
            for c in consumers:
                c.poll(0)
            pending = 0
    for c in consumers:
        # A synchronous commit of the last round: every earlier one was sent before it.
        c.commit(offsets=[TopicPartition(TOPIC, p, rounds) for p in range(args.partitions)],
                 asynchronous=False)
        c.close()
    return rounds * args.groups * args.partitions


def restarts(args, data, work, name):
    runs = []
    for i in range(args.restarts):
        b = Broker(args.bin, data, work / f"{name}-{i}.log", args, cleaner=False)
        records, read_bytes = b.replayed()
        b.stop()
        runs.append({"startup_s": round(b.started_s, 3), "records_replayed": records,
                     "bytes_replayed": read_bytes})
    return {"offsets_log_bytes": offsets_bytes(data), "runs": runs,
            "best_startup_s": min(r["startup_s"] for r in runs)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(REPO / "target" / "release" / "minikafka"))
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--commits", type=int, default=120_000)
    parser.add_argument("--segment-bytes", type=int, default=100 << 20)
    parser.add_argument("--segment-ms", type=int, default=2000)
    parser.add_argument("--restarts", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        data = work / "data"
        b = Broker(args.bin, data, work / "write.log", args, cleaner=False)
        started = time.perf_counter()
        written = write_commits(b, args)
        write_s = time.perf_counter() - started
        b.stop()
        before = restarts(args, data, work, "before")

        b = Broker(args.bin, data, work / "clean.log", args, cleaner=True)
        if args.segment_ms <= 60_000:
            # The cleaner rolls a quiet active segment only once segment.ms has passed.
            time.sleep(args.segment_ms / 1000)
        stable_since, last = time.monotonic(), offsets_bytes(data)
        deadline = time.monotonic() + 300
        while time.monotonic() - stable_since < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            now = offsets_bytes(data)
            if now != last:
                last, stable_since = now, time.monotonic()
        cleanings = sum(1 for line in open(b.log_path, errors="replace")
                        if "log cleaned" in line and "__consumer_offsets" in line)
        b.stop()
        after = restarts(args, data, work, "after")

    live_keys = args.groups * args.partitions
    print(json.dumps({
        "load_average": os.getloadavg(),
        "binary": args.bin,
        "offset_records_written": written,
        "write_s": round(write_s, 1),
        "live_keys": live_keys,
        "segment_bytes": args.segment_bytes,
        "segment_ms": args.segment_ms,
        "cleanings": cleanings,
        "before_cleaning": before,
        "after_cleaning": after,
    }, indent=2))
    print(f"{written} offset records for {live_keys} keys: replayed "
          f"{before['runs'][0]['records_replayed']} -> {after['runs'][0]['records_replayed']}, "
          f"offsets log {before['offsets_log_bytes']} -> {after['offsets_log_bytes']} bytes, "
          f"startup {before['best_startup_s']} s -> {after['best_startup_s']} s "
          f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
