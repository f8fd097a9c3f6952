#!/usr/bin/env python3
"""Disk full: the real broker's data directory on a small tmpfs, filled, then freed.

Mounts a tmpfs of ``--size-mib`` (default 16) as the data directory of the ``minikafka``
binary (``$MINIKAFKA_BIN``, else the newest build under the cargo target dir) with
``flush.policy=fsync``, and runs, with librdkafka clients (confluent-kafka):

1. Setup: topics ``fill`` and ``other`` (one partition each); records produced to ``other``;
   a group commits an offset of ``other`` (OffsetCommit, the simple-consumer form).
2. Fill: an ``acks=all`` producer without retries sends 16 KiB records to ``fill`` until a
   produce fails. Checked: the failure is KAFKA_STORAGE_ERROR, its answer came within
   ``ANSWER_LIMIT_S`` (timed: the figure is the slowest answer to a refused produce), and
   further produces keep being refused the same way, not hung.
3. While full: Metadata answers; fetches of ``other`` and of ``fill`` return every record
   acknowledged so far; OffsetCommits of ``other`` are answered (they need disk space too: a
   small one may still fit in a page the offsets log holds, so they go on until one is
   refused, and that refusal must be NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, codes the
   client retries, as Kafka answers a storage error of its offsets log); the broker is alive.
4. Free space by growing the tmpfs (``mount -o remount,size=``): produce to ``fill`` works again
   without a restart.
5. Fill again, then free space by deleting the ``fill`` topic: produce to ``other`` and
   OffsetCommit work again without a restart.
6. Nothing acknowledged lost: before the delete, every acknowledged ``fill`` record is read back
   at its offset; at the end the broker is stopped (SIGTERM), restarted on the same tmpfs, and
   every acknowledged ``other`` record and the last committed offset are read back.

Needs root for mount/umount (as CI and these machines have); when the mount fails the run
fails with exit status 2 and says why: it is never skipped. Exit status 0: every check passed;
1: a check failed (listed).
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from soak_broker import Broker, Failed, report  # noqa: E402

RECORD_BYTES = 16 * 1024
ANSWER_LIMIT_S = 30
STORAGE_ERROR = 56  # Kafka's KAFKA_STORAGE_ERROR
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
GROUP = "disk-full-group"


def mount_tmpfs(path, size_mib):
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "minikafka-disk-full", str(path)],
        capture_output=True, text=True,
    )
    if result.returncode != 0:
        sys.exit(f"disk_full: cannot mount a tmpfs at {path} (needs root: uid {os.getuid()}): "
                 f"{result.stderr.strip() or result.returncode}. This campaign cannot run here; "
                 "it is not skipped.")


def remount(path, size_mib):
    subprocess.run(["mount", "-o", f"remount,size={size_mib}m", str(path)], check=True)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def producer(bootstrap, retries):
    from confluent_kafka import Producer

    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "retries": retries,
        "linger.ms": 1,
        "message.timeout.ms": ANSWER_LIMIT_S * 1000,
        "log_level": 2,
    })


def produce_one(prod, topic, value, key=None):
    """Produces one record and waits for its answer. Returns (error code or 0, offset, seconds)."""
    out = {}

    def report(err, msg):
        out["code"] = err.code() if err is not None else 0
        out["offset"] = msg.offset()

    began = time.monotonic()
    prod.produce(topic, value=value, key=key, on_delivery=report)
    while "code" not in out:
        prod.poll(0.01)
        if time.monotonic() - began > ANSWER_LIMIT_S + 5:
            raise Failed(f"produce to {topic}: no answer within {ANSWER_LIMIT_S + 5} s (hang)")
    return out["code"], out["offset"], time.monotonic() - began


def read_all(bootstrap, topic):
    """Every record of partition 0 of `topic`, offset -> value, read from 0 to the high watermark."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "log_level": 2})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        records = {}
        if high == 0:
            return records, high
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(records) < high:
            if time.monotonic() > deadline:
                raise Failed(f"fetch of {topic}: {len(records)} of {high} records within 60 s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise Failed(f"fetch of {topic}: {msg.error()}")
            records[msg.offset()] = msg.value()
        return records, high
    finally:
        consumer.close()


def commit(bootstrap, offset):
    """OffsetCommit of `other` partition 0 for GROUP; returns None on success, else the error."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "log_level": 2,
                         "socket.timeout.ms": ANSWER_LIMIT_S * 1000})
    try:
        began = time.monotonic()
        try:
            result = consumer.commit(offsets=[TopicPartition("other", 0, offset)], asynchronous=False)
        except KafkaException as e:
            return str(e.args[0]), time.monotonic() - began
        if result and result[0].error is not None:
            return str(result[0].error), time.monotonic() - began
        return None, time.monotonic() - began
    finally:
        consumer.close()


def commits_until_refused(bootstrap, first, prior):
    """Commits offsets first, first+1, ... until one is refused.

    Returns the last offset committed (`prior` if none was) and how the refusal came."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "log_level": 2})
    try:
        for i in range(2000):
            began = time.monotonic()
            try:
                result = consumer.commit(offsets=[TopicPartition("other", 0, first + i)], asynchronous=False)
                error = result[0].error if result else None
            except KafkaException as e:
                error = e.args[0]
            if error is not None:
                # A storage error of the offsets log is answered as Kafka does: a code the
                # client retries (it finds the coordinator again), never UNKNOWN_SERVER_ERROR.
                if error.code() not in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
                    raise Failed(f"OffsetCommit on a full disk refused with {error}, not a retriable code")
                return (first + i - 1 if i else prior), (f"after {i} more commits: {error.name()} in "
                                       f"{(time.monotonic() - began) * 1000:.0f} ms (the client's retries included)")
        raise Failed("2000 commits on a full disk all acknowledged")
    finally:
        consumer.close()


def committed(bootstrap):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "log_level": 2})
    try:
        return consumer.committed([TopicPartition("other", 0)], timeout=10)[0].offset
    finally:
        consumer.close()


def check_acked(bootstrap, topic, acked):
    records, high = read_all(bootstrap, topic)
    lost = [(o, v) for o, v in acked.items() if records.get(o) != v]
    if lost:
        raise Failed(f"{topic}: {len(lost)} acknowledged records lost or changed, first {lost[0][0]}")
    return high


def fill(prod, topic, acked, figures, label):
    """Produces RECORD_BYTES records until one is refused; returns the refusals' answer times."""
    n = 0
    began = time.monotonic()
    while True:
        value = f"{label}-{n:08d}-".encode().ljust(RECORD_BYTES, b"x")
        code, offset, took = produce_one(prod, topic, value)
        if code == 0:
            acked[offset] = value
            n += 1
            continue
        if code != STORAGE_ERROR:
            raise Failed(f"{label}: produce on a full disk refused with code {code}, not KAFKA_STORAGE_ERROR")
        figures[f"{label}: records acknowledged before full"] = n
        figures[f"{label}: seconds to fill"] = round(time.monotonic() - began, 2)
        refusals = [took]
        # The next produces are refused too, each promptly (none hangs, none is half-applied).
        for i in range(5):
            code, offset, took = produce_one(prod, topic, f"{label}-again-{i}-".encode().ljust(RECORD_BYTES, b"y"))
            if code == 0:
                raise Failed(f"{label}: a produce after KAFKA_STORAGE_ERROR was acknowledged with no space freed")
            if code != STORAGE_ERROR:
                raise Failed(f"{label}: refused with code {code}, not KAFKA_STORAGE_ERROR")
            refusals.append(took)
        figures[f"{label}: slowest KAFKA_STORAGE_ERROR answer (ms)"] = round(max(refusals) * 1000, 1)
        return


def until_produced(prod, topic, acked, label):
    """After space was freed: the first produce may still meet the old error; retry briefly."""
    for attempt in range(20):
        value = f"{label}-{attempt}".encode()
        code, offset, _ = produce_one(prod, topic, value)
        if code == 0:
            acked[offset] = value
            return attempt + 1
        time.sleep(0.1)
    raise Failed(f"{label}: produce still refused (code {code}) after space was freed")


def run(args):
    from confluent_kafka.admin import AdminClient, NewTopic

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="minikafka-disk-full-"))
    data = workdir / "data"
    mount_tmpfs(data, args.size_mib)
    broker = Broker(data, workdir / "broker.log", overrides=[
        "flush.policy=fsync", "num.partitions=1", "offsets.topic.num.partitions=1"])
    figures, failures = {}, []
    try:
        broker.start("first")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
        for future in admin.create_topics([NewTopic("fill", 1, 1), NewTopic("other", 1, 1)]).values():
            future.result(timeout=30)
        prod = producer(broker.bootstrap, retries=0)
        other_acked, fill_acked = {}, {}
        for i in range(100):
            value = f"other-{i}".encode()
            code, offset, _ = produce_one(prod, "other", value)
            if code:
                raise Failed(f"setup produce to other: code {code}")
            other_acked[offset] = value
        error, _ = commit(broker.bootstrap, 50)
        if error:
            raise Failed(f"setup OffsetCommit failed: {error}")
        last_commit = 50
        figures["tmpfs size (MiB)"] = args.size_mib
        figures["free before filling (KiB)"] = free_bytes(data) // 1024

        fill(prod, "fill", fill_acked, figures, "fill 1")
        figures["free when full (KiB)"] = free_bytes(data) // 1024

        # While full: the rest of the broker serves.
        began = time.monotonic()
        metadata = prod.list_topics(timeout=10)
        if not {"fill", "other"} <= set(metadata.topics):
            raise Failed(f"metadata while full lacks topics: {sorted(metadata.topics)}")
        figures["metadata while full (ms)"] = round((time.monotonic() - began) * 1000, 1)
        check_acked(broker.bootstrap, "other", other_acked)
        check_acked(broker.bootstrap, "fill", fill_acked)
        error, took = commit(broker.bootstrap, 60)
        figures["OffsetCommit while full"] = f"{error or 'committed'} in {took * 1000:.0f} ms"
        if error is None:
            last_commit = 60
        # Commits are small: they may still fit in a page the offsets log holds. Commit until
        # one is refused, so the refusal's code is seen (it must be one a client retries).
        last_commit, figures["OffsetCommit refusal while full"] = commits_until_refused(broker.bootstrap, 61, last_commit)
        code, offset, took = produce_one(prod, "other", b"small-while-full")
        figures["small produce to other while full"] = f"code {code} in {took * 1000:.0f} ms"
        if code == 0:
            other_acked[offset] = b"small-while-full"
        elif code != STORAGE_ERROR:
            raise Failed(f"small produce while full: code {code}")
        if not broker.alive():
            raise Failed(f"broker died on a full disk:\n{broker.tail()}")

        # Free space by growing the filesystem: produce works again, no restart.
        remount(data, args.grow_mib)
        figures["attempts to produce after growing"] = until_produced(prod, "fill", fill_acked, "after-grow")
        check_acked(broker.bootstrap, "fill", fill_acked)

        # Fill again, then free space by deleting the topic that filled it.
        fill(prod, "fill", fill_acked, figures, "fill 2")
        check_acked(broker.bootstrap, "fill", fill_acked)
        figures["fill records acknowledged, all read back"] = len(fill_acked)
        for future in admin.delete_topics(["fill"]).values():
            future.result(timeout=30)
        figures["free after deleting fill (KiB)"] = free_bytes(data) // 1024
        figures["attempts to produce after deleting"] = until_produced(prod, "other", other_acked, "after-delete")
        error, _ = commit(broker.bootstrap, 70)
        if error:
            raise Failed(f"OffsetCommit after space was freed: {error}")
        last_commit = 70
        if not broker.alive():
            raise Failed(f"broker died:\n{broker.tail()}")
        prod.flush(10)

        # Nothing acknowledged lost, across a clean restart on the same tmpfs.
        broker.stop()
        broker.start("restart")
        check_acked(broker.bootstrap, "other", other_acked)
        got = committed(broker.bootstrap)
        if got != last_commit:
            raise Failed(f"committed offset after restart is {got}, last acknowledged commit {last_commit}")
        figures["other records acknowledged, all read back after restart"] = len(other_acked)
        broker.stop()
    except Failed as e:
        failures.append(str(e))
    finally:
        broker.kill()
        subprocess.run(["umount", str(data)], check=False)
    status = report(figures, failures, "KAFKA_STORAGE_ERROR when full, the rest served, produce "
                    "resumed after growing and after deleting a topic, nothing acknowledged lost",
                    broker.log_path)
    if status == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=16, help="tmpfs size at start (default 16)")
    parser.add_argument("--grow-mib", type=int, default=32, help="tmpfs size after growing (default 32)")
    args = parser.parse_args()
    if args.size_mib < 1 or args.grow_mib <= args.size_mib:
        parser.error("sizes must be positive and --grow-mib larger than --size-mib")
    sys.exit(run(args))


if __name__ == "__main__":
    main()
