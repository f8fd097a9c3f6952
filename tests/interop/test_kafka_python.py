"""kafka-python against minikafka: admin, produce with acks='all', assign + seek consume."""

import time

import pytest

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

WAIT_S = 30


def create_topic(broker, name, partitions):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=15000)
        assert name in admin.list_topics()
    finally:
        admin.close()


def consume(broker, topic, partition, count):
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=30000,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = []
        deadline = time.monotonic() + WAIT_S
        while len(records) < count:
            assert time.monotonic() < deadline, f"got {len(records)} of {count} records"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def test_produce_consume_round_trip(broker):
    """200 keyed records with headers, acks='all' (idempotence off: see the next test):
    offsets 0..199 in send order; read back from the beginning with assign +
    seek_to_beginning, byte-exact."""
    create_topic(broker, "py-round-trip", 1)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5, enable_idempotence=False
    )
    sent = []
    futures = []
    for i in range(200):
        key = f"k{i % 7}".encode()
        value = f"value {i} ".encode() * (1 + i % 5)
        headers = [("seq", str(i).encode()), ("empty", b"")]
        sent.append((key, value, headers))
        futures.append(producer.send("py-round-trip", key=key, value=value, headers=headers, partition=0))
    offsets = [f.get(timeout=WAIT_S).offset for f in futures]
    producer.close(timeout=10)
    assert offsets == list(range(200))

    records = consume(broker, "py-round-trip", 0, 200)
    assert [r.offset for r in records] == list(range(200))
    for (key, value, headers), r in zip(sent, records):
        assert r.key == key
        assert r.value == value
        assert list(r.headers) == headers


def test_metadata_partitions_and_offsets(broker):
    """A 3-partition topic shows partitions {0,1,2}; beginning/end offsets per partition match
    what was produced to each."""
    create_topic(broker, "py-parts", 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False)
    for p in range(3):
        for i in range(p + 1):
            producer.send("py-parts", value=f"{p}-{i}".encode(), partition=p).get(timeout=WAIT_S)
    producer.close(timeout=10)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        assert consumer.partitions_for_topic("py-parts") == {0, 1, 2}
        tps = [TopicPartition("py-parts", p) for p in range(3)]
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert consumer.end_offsets(tps) == {tp: tp.partition + 1 for tp in tps}
    finally:
        consumer.close()


def test_tombstone_round_trip(broker):
    """A null value (tombstone) comes back as None, distinct from an empty value."""
    create_topic(broker, "py-tomb", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False)
    producer.send("py-tomb", key=b"a", value=None, partition=0).get(timeout=WAIT_S)
    producer.send("py-tomb", key=b"b", value=b"", partition=0).get(timeout=WAIT_S)
    producer.close(timeout=10)
    records = consume(broker, "py-tomb", 0, 2)
    assert [(r.key, r.value) for r in records] == [(b"a", None), (b"b", b"")]


def test_default_producer_is_idempotent(broker):
    """kafka-python's default producer (like Java's since 3.0) is idempotent: it sends
    InitProducerId, then batches with a producer id and sequence numbers. 100 records come
    back once each, in order."""
    create_topic(broker, "py-idem", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [producer.send("py-idem", value=f"idem-{i}".encode(), partition=0) for i in range(100)]
    offsets = [f.get(timeout=WAIT_S).offset for f in futures]
    producer.close(timeout=10)
    assert offsets == list(range(100))
    records = consume(broker, "py-idem", 0, 100)
    assert [r.value for r in records] == [f"idem-{i}".encode() for i in range(100)]
