#!/usr/bin/env python3
"""Seeds the fuzz corpora from real clients and real segment files.

Starts the minikafka binary on 127.0.0.1 behind a recording TCP proxy, drives librdkafka (kcat)
and kafka-python through the proxy (metadata, topic admin, produce with every codec, keyed and
with headers, idempotent produce, fetch, offsets, group requests), stops the broker, and writes:

- corpus/request_decode/   every distinct request frame the clients sent (size prefix removed)
- corpus/produce_request/  the Produce frames among them
- corpus/frame_stream/     the first bytes of each client connection, as sent
- corpus/record_batch/     every distinct batch found in the broker's segment files
- corpus/segment_recovery/ the segment files themselves (small ones), behind the target's
                           parameter bytes
- corpus/offset_index/, corpus/time_index/  the index files, behind their parameter bytes

Usage: fuzz/seeds/capture.py [MINIKAFKA_BIN]   (default target/debug/minikafka). Needs kcat and
kafka-python. Names say which client sent what, e.g. request_decode/rdkafka-Produce-v9-1a2b3c4d.
"""

import hashlib
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
FUZZ = HERE.parent
REPO = FUZZ.parent
CORPUS = FUZZ / "corpus"
API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
             9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
             13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
             18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 22: "InitProducerId",
             32: "DescribeConfigs", 37: "CreatePartitions", 60: "DescribeCluster"}
STREAM_SEED_BYTES = 16 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RecordingProxy:
    """Forwards 127.0.0.1:port to the broker and keeps what each client sent, per connection."""

    def __init__(self, broker_port):
        self.broker_port = broker_port
        self.port = free_port()
        self.client = "unknown"  # label for connections accepted from now on
        self.streams = []  # (client label, bytearray)
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.broker_port))
            except OSError:
                conn.close()
                continue
            sent = bytearray()
            with self.lock:
                self.streams.append((self.client, sent))
            threading.Thread(target=self._pump, args=(conn, upstream, sent), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn, None), daemon=True).start()

    @staticmethod
    def _pump(src, dst, record):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record is not None:
                    record.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def frames(stream):
    pos = 0
    while pos + 4 <= len(stream):
        (size,) = struct.unpack_from(">i", stream, pos)
        if size <= 0 or pos + 4 + size > len(stream):
            return
        yield bytes(stream[pos + 4:pos + 4 + size])
        pos += 4 + size


def run(cmd, **kw):
    """Runs a client to completion, or for its time limit (a group consumer never ends)."""
    kw.setdefault("timeout", 60)
    try:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    except subprocess.TimeoutExpired:
        pass


def drive_kcat(bootstrap):
    base = ["kcat", "-b", bootstrap]
    run(base + ["-L"])
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        for batch_size in (1, 20):
            lines = "".join(f"k{i}:value {i} {codec}\n" for i in range(20)).encode()
            run(base + ["-P", "-t", "seeds", "-K:", "-z", codec, "-H", "h1=v1",
                        "-X", f"batch.num.messages={batch_size}"], input=lines)
    run(base + ["-P", "-t", "seeds", "-X", "enable.idempotence=true", "-X", "acks=all"],
        input=b"idem-1\nidem-2\n")
    run(base + ["-C", "-t", "seeds", "-o", "beginning", "-e", "-q"])
    run(base + ["-C", "-t", "seeds", "-o", "-2", "-e", "-q"])
    run(base + ["-G", "seed-group", "seeds"], timeout=8)


def drive_kafka_python(bootstrap):
    code = f"""
from kafka import KafkaProducer, KafkaConsumer, KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic, NewPartitions, ConfigResource, ConfigResourceType
a = KafkaAdminClient(bootstrap_servers={bootstrap!r}, request_timeout_ms=5000)
for call in (lambda: a.create_topics([NewTopic('py-seeds', 2, 1)]),
             lambda: a.create_partitions({{'py-seeds': NewPartitions(3)}}),
             lambda: a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, 'py-seeds')]),
             lambda: a.list_consumer_groups(),
             lambda: a.describe_consumer_groups(['g'])):
    try: call()
    except Exception: pass
for codec in (None, 'gzip', 'snappy', 'lz4', 'zstd'):
    try:
        p = KafkaProducer(bootstrap_servers={bootstrap!r}, compression_type=codec, acks='all')
        for i in range(10):
            p.send('py-seeds', key=b'k%d' % i, value=b'v' * i, headers=[('h', b'x')])
        p.flush(); p.close()
    except Exception: pass
c = KafkaConsumer(bootstrap_servers={bootstrap!r}, auto_offset_reset='earliest',
                  consumer_timeout_ms=2000, group_id=None)
tp = TopicPartition('py-seeds', 0)
c.assign([tp]); c.beginning_offsets([tp]); c.end_offsets([tp])
c.offsets_for_times({{tp: 0}})
for _ in c: pass
c.close()
try:
    g = KafkaConsumer('py-seeds', bootstrap_servers={bootstrap!r}, group_id='py-group',
                      consumer_timeout_ms=3000, auto_offset_reset='earliest')
    for _ in g: pass
    g.commit(); g.close()
except Exception: pass
try: a.create_topics([NewTopic('py-doomed', 1, 1)]); a.delete_topics(['py-doomed'])
except Exception: pass
a.close()
"""
    run([sys.executable, "-c", code], timeout=90)


def write(folder, name, data, seen):
    digest = hashlib.sha1(data).hexdigest()[:8]
    if (folder, digest) in seen:
        return
    seen.add((folder, digest))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}-{digest}").write_bytes(data)


def batches(log):
    pos = 0
    while pos + 61 <= len(log):
        (length,) = struct.unpack_from(">i", log, pos + 8)
        if length < 49 or pos + 12 + length > len(log):
            return
        yield log[pos:pos + 12 + length]
        pos += 12 + length


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else str(REPO / "target/debug/minikafka")
    work = pathlib.Path(tempfile.mkdtemp(prefix="mk-seeds-"))
    data_dir = work / "data"
    broker_port = free_port()
    proxy = RecordingProxy(broker_port)
    log = open(work / "broker.log", "wb")
    # Clients are told to connect to the proxy, so every connection is recorded.
    broker = subprocess.Popen([binary, "--override", f"listeners=PLAINTEXT://127.0.0.1:{broker_port}",
                               "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}",
                               "--override", f"log.dirs={data_dir}",
                               "--override", "log.index.interval.bytes=256",
                               "--override", "log.segment.bytes=4096"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            if b"listening on" in (work / "broker.log").read_bytes():
                break
            if broker.poll() is not None:
                sys.exit(f"broker exited: {(work / 'broker.log').read_text(errors='replace')}")
            time.sleep(0.1)
        bootstrap = f"127.0.0.1:{proxy.port}"
        proxy.client = "rdkafka"
        drive_kcat(bootstrap)
        proxy.client = "kafka-python"
        drive_kafka_python(bootstrap)
        time.sleep(0.5)
    finally:
        broker.terminate()
        broker.wait(timeout=20)

    seen = set()
    counts = {}
    with proxy.lock:
        streams = list(proxy.streams)
    for client, stream in streams:
        if stream:
            params = b"\xff\xff" + bytes([len(stream) % 251])
            write(CORPUS / "frame_stream", client, params + bytes(stream[:STREAM_SEED_BYTES]), seen)
        for frame in frames(stream):
            key, version = struct.unpack_from(">hh", frame, 0)
            name = f"{client}-{API_NAMES.get(key, key)}-v{version}"
            if counts.get(name, 0) >= 8:
                continue  # enough of one kind: keep the corpus small
            counts[name] = counts.get(name, 0) + 1
            write(CORPUS / "request_decode", name, frame, seen)
            if key == 0:
                write(CORPUS / "produce_request", name, frame, seen)

    for path in sorted(data_dir.rglob("*")):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        label = f"{path.parent.name}-{path.stem}"
        if path.suffix == ".log" and raw:
            for batch in batches(raw):
                write(CORPUS / "record_batch", f"{label}-batch", b"\x00" + batch, seen)
            if len(raw) <= 64 * 1024:
                # window 512 B, index every 64 B, no batch limit, no flags, no short read
                write(CORPUS / "segment_recovery", label, b"\x02\x00\x01\x00\x00\x00" + raw, seen)
            log_size = len(raw)
        elif path.suffix == ".index":
            log_file = path.with_suffix(".log")
            log_size = log_file.stat().st_size if log_file.exists() else 0
            write(CORPUS / "offset_index", label, struct.pack(">I", log_size) + raw, seen)
        elif path.suffix == ".timeindex":
            write(CORPUS / "time_index", label, b"\xff\xff\xff\xff" + raw, seen)
    shutil.rmtree(work)
    for folder in sorted(CORPUS.iterdir()):
        files = list(folder.iterdir())
        print(f"{folder.name}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
