"""A compacted topic with kafka-python, kcat and the mk CLI: created with
``mk topics create --config cleanup.policy=compact``, keyless records refused with
INVALID_RECORD, the log compacted to the latest record per key at their original offsets, and
both clients read across the offset gaps it leaves."""

import subprocess
import time

import pytest

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidRecordError

from built_binary import built_binary
from test_kcat import kcat

WAIT_S = 30
TOPIC = "py-table"

pytestmark = pytest.mark.minikafka_only("the broker's cleaner and the mk CLI")


def mk_binary():
    return built_binary("mk", "MK_BIN") or pytest.fail("no mk binary: set MK_BIN or run `cargo build --bin mk`")


def read_all(broker, last_offset):
    """(offset, key, value) from the beginning of partition 0 up to ``last_offset``."""
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
        request_timeout_ms=30000,
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        rows = []
        deadline = time.monotonic() + WAIT_S
        while not rows or rows[-1][0] < last_offset:
            assert time.monotonic() < deadline, f"did not reach {last_offset}: {rows}"
            for batch in consumer.poll(timeout_ms=300).values():
                rows.extend((r.offset, r.key, r.value) for r in batch)
        return rows
    finally:
        consumer.close()


def test_compacted_topic_reads_across_gaps(broker_factory):
    broker = broker_factory(log_cleaner_backoff_ms="100")
    subprocess.run(
        [mk_binary(), "-b", broker.bootstrap, "topics", "create", TOPIC, "--partitions", "1",
         "--config", "cleanup.policy=compact", "--config", "segment.ms=200",
         "--config", "min.cleanable.dirty.ratio=0.01"],
        check=True, timeout=WAIT_S,
    )
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5, enable_idempotence=False,
        retries=0,
    )
    with pytest.raises(InvalidRecordError):
        producer.send(TOPIC, value=b"no key", partition=0).get(timeout=WAIT_S)
    latest = {}
    last_offset = -1
    for round_ in range(3):
        futures = []
        for k in range(10):
            key = f"k{k}".encode()
            value = None if (round_ == 2 and k == 3) else f"r{round_}-{k}".encode()
            futures.append((key, value, producer.send(TOPIC, key=key, value=value, partition=0)))
        for key, value, future in futures:
            offset = future.get(timeout=WAIT_S).offset
            latest[key] = (offset, value)
            last_offset = max(last_offset, offset)
        time.sleep(0.25)  # segment.ms passes: the cleaner rolls the quiet segment
    producer.close()
    want = sorted((o, k, v) for k, (o, v) in latest.items())
    deadline = time.monotonic() + WAIT_S
    got = read_all(broker, last_offset)
    while got != want:
        assert time.monotonic() < deadline, f"not compacted: {got}"
        time.sleep(0.2)
        got = read_all(broker, last_offset)
    assert len(got) == 10 and any(v is None for _, _, v in got)
    # kcat (the system librdkafka) reads the same rows, gaps and all (-Z: null as NULL).
    out = kcat(broker, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-Z", "-f", "%o|%k|%s\n")
    rows = [line.split("|") for line in out.splitlines()]
    assert [(int(o), k.encode(), None if s == "NULL" else s.encode()) for o, k, s in rows] == want
