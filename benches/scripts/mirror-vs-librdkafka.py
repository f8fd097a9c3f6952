#!/usr/bin/env python3
"""`mk mirror --once` against a plain consume-then-produce pipeline in librdkafka
(confluent-kafka), on the same run: the same records, the same source, a fresh target each.

    python3 benches/scripts/mirror-vs-librdkafka.py [--records 1000000] [--partitions 4]
        [--mk target/release/mk] [--broker target/debug/minikafka] [--repeat 3]

Both pipelines copy partition to partition with keys, values, headers and timestamps; the
librdkafka one (acks=all, idempotent, linger 5 ms) tracks nothing durable (no progress, no
offset map, no group sync), so it is the floor of what a copy costs through librdkafka. The
brokers are whatever binary --broker names, the same for both. Prints one line per run and the
medians. Ports: ephemeral; data: temporary directories.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, binary):
        self.dir = tempfile.TemporaryDirectory()
        self.addr = f"127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [binary, "--override", f"listeners=PLAINTEXT://{self.addr}",
             "--override", f"log.dirs={self.dir.name}/data"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in self.proc.stdout:
            if "listening on" in line:
                break
        else:
            raise SystemExit("broker did not start")

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.dir.cleanup()


def fill(addr, topic, partitions, n):
    admin = AdminClient({"bootstrap.servers": addr})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    p = Producer({"bootstrap.servers": addr, "linger.ms": 5, "enable.idempotence": True,
                  "queue.buffering.max.messages": 1000000})
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=b"value-%d" % i, key=b"key-%d" % i, partition=i % partitions,
                          headers=[("seq", str(i).encode())], timestamp=1_700_000_000_000 + i)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


def librdkafka_pipeline(source, target, topic, partitions, n):
    admin = AdminClient({"bootstrap.servers": target})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    c = Consumer({"bootstrap.servers": source, "group.id": "bench", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.max.bytes": 50 * 1024 * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    p = Producer({"bootstrap.servers": target, "linger.ms": 5, "enable.idempotence": True,
                  "acks": "all", "queue.buffering.max.messages": 1000000})
    copied = 0
    start = time.monotonic()
    while copied < n:
        for m in c.consume(10000, 1.0):
            if m.error():
                raise SystemExit(m.error())
            while True:
                try:
                    p.produce(topic, value=m.value(), key=m.key(), partition=m.partition(),
                              headers=m.headers(), timestamp=m.timestamp()[1])
                    break
                except BufferError:
                    p.poll(0.01)
            copied += 1
        p.poll(0)
    assert p.flush(120) == 0
    elapsed = time.monotonic() - start
    c.close()
    return elapsed


def mk_mirror(mk, source, target):
    start = time.monotonic()
    out = subprocess.run([mk, "mirror", "--source", source, "--target", target, "--once",
                          "--progress-secs", "0"], capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return elapsed, out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mk", default="target/release/mk")
    ap.add_argument("--broker", default="target/debug/minikafka")
    a = ap.parse_args()
    source = Broker(a.broker)
    try:
        fill(source.addr, "events", a.partitions, a.records)
        rates = {"mk mirror --once": [], "librdkafka consume+produce": []}
        for run in range(a.repeat):
            for name in rates:
                target = Broker(a.broker)
                try:
                    if name.startswith("mk"):
                        secs, report = mk_mirror(a.mk, source.addr, target.addr)
                        assert f"copied {a.records} records of events" in report, report
                    else:
                        secs = librdkafka_pipeline(source.addr, target.addr, "events",
                                                   a.partitions, a.records)
                finally:
                    target.close()
                rate = a.records / secs
                rates[name].append(rate)
                print(f"run {run + 1}: {name}: {secs:.2f} s, {rate:,.0f} records/s", flush=True)
        for name, r in rates.items():
            print(f"median {name}: {statistics.median(r):,.0f} records/s "
                  f"({min(r):,.0f}-{max(r):,.0f})")
    finally:
        source.close()


if __name__ == "__main__":
    main()
