"""Transactions (KIP-98, KIP-447) with real clients: what an exactly-once application relies on.

confluent-kafka (librdkafka):
- commit and abort, read back under read_committed (only committed records) and
  read_uncommitted (everything);
- control records (the COMMIT/ABORT markers) take offsets: the high watermark counts them and
  the records of the next transaction start after them;
- an open transaction holds the last stable offset: a read_committed consumer sees nothing of
  it, nor anything produced after it, until it commits; ListOffsets under read_committed
  answers the LSO;
- consume-transform-produce with ``send_offsets_to_transaction``, an aborted batch redone: the
  read_committed output holds every input record exactly once and the group's committed
  offset is the input's end;
- fencing: a second producer with the same ``transactional.id`` fences the first, whose
  open transaction is aborted;
- the broker aborts a transaction that outlives ``transaction.timeout.ms``.
kafka-python and aiokafka (both support transactions in their installed versions): commit
and abort, read back under read_committed.

Every wait is bounded (``WAIT_S``) and nothing asserts how fast anything happens.
"""

import asyncio
import time
import uuid

import pytest
from confluent_kafka import (
    Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from group_clients import GROUP_BROKER, QUIET, WAIT_S, admin, create_topic, produce

# The coordinator checks for timed-out transactions every this many ms (Kafka: 10 s).
ABORT_CHECK_MS = "500"


def txn_producer(broker, txn_id=None, **extra):
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": txn_id or f"tx-{uuid.uuid4().hex[:8]}",
        "linger.ms": 5,
        **QUIET,
        **extra,
    }
    producer = Producer(conf)
    producer.init_transactions(WAIT_S)
    return producer


def reader(broker, isolation, **extra):
    """An assign-mode consumer (no group) that never commits."""
    return Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
        **QUIET,
        **extra,
    })


def read_all(broker, topic, partitions, isolation, settle_s=2.0):
    """Everything ``isolation`` lets a consumer read from ``topic``, as (partition, offset,
    value): read until every partition reported its end (its LSO for read_committed) and
    nothing new arrived for ``settle_s`` (bounded by WAIT_S). The end, not the quiet time
    alone, decides: a consumer slow to start on a loaded machine is quiet too."""
    consumer = reader(broker, isolation, **{"enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        at_end = set()
        deadline = time.monotonic() + WAIT_S
        quiet_since = time.monotonic()
        while len(at_end) < partitions or time.monotonic() - quiet_since < settle_s:
            assert time.monotonic() < deadline, f"{topic}: ends of {sorted(at_end)} only, read {out}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            out.append((msg.partition(), msg.offset(), msg.value()))
            quiet_since = time.monotonic()
        return out
    finally:
        consumer.close()


def values(records):
    return [v for (_, _, v) in records]


def send_txn(producer, topic, vals, commit, partition=0):
    producer.begin_transaction()
    for v in vals:
        producer.produce(topic, value=v, partition=partition)
    producer.flush(WAIT_S)
    if commit:
        producer.commit_transaction(WAIT_S)
    else:
        producer.abort_transaction(WAIT_S)


def test_commit_and_abort_read_committed_vs_uncommitted(broker):
    create_topic(broker, "txn-basic", 1)
    producer = txn_producer(broker)
    send_txn(producer, "txn-basic", [b"c0", b"c1", b"c2"], commit=True)
    send_txn(producer, "txn-basic", [b"a0", b"a1"], commit=False)
    send_txn(producer, "txn-basic", [b"c3", b"c4"], commit=True)
    committed = values(read_all(broker, "txn-basic", 1, "read_committed"))
    assert committed == [b"c0", b"c1", b"c2", b"c3", b"c4"]
    everything = values(read_all(broker, "txn-basic", 1, "read_uncommitted"))
    assert everything == [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3", b"c4"]


def test_control_records_take_offsets(broker):
    create_topic(broker, "txn-markers", 1)
    producer = txn_producer(broker)
    send_txn(producer, "txn-markers", [b"x0", b"x1", b"x2"], commit=True)
    send_txn(producer, "txn-markers", [b"y0", b"y1"], commit=False)
    send_txn(producer, "txn-markers", [b"z0"], commit=True)
    consumer = reader(broker, "read_committed")
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("txn-markers", 0), timeout=WAIT_S)
    finally:
        consumer.close()
    # 3 + marker, 2 + marker, 1 + marker.
    assert (low, high) == (0, 9)
    committed = read_all(broker, "txn-markers", 1, "read_committed")
    assert [(o, v) for (_, o, v) in committed] == [(0, b"x0"), (1, b"x1"), (2, b"x2"), (7, b"z0")]
    everything = read_all(broker, "txn-markers", 1, "read_uncommitted")
    assert [(o, v) for (_, o, v) in everything] == [
        (0, b"x0"), (1, b"x1"), (2, b"x2"), (4, b"y0"), (5, b"y1"), (7, b"z0"),
    ], "offsets 3, 6 and 8 are the markers"


def list_offset(broker, topic, partition, isolation):
    futures = admin(broker).list_offsets(
        {TopicPartition(topic, partition): OffsetSpec.latest()},
        isolation_level=isolation, request_timeout=WAIT_S)
    return futures[TopicPartition(topic, partition)].result(timeout=WAIT_S).offset


def test_open_transaction_holds_the_last_stable_offset(broker):
    create_topic(broker, "txn-lso", 1)
    produce(broker, "txn-lso", [b"before"])
    producer = txn_producer(broker)
    producer.begin_transaction()
    for v in [b"t0", b"t1", b"t2"]:
        producer.produce("txn-lso", value=v, partition=0)
    producer.flush(WAIT_S)
    # Produced after the open transaction began, outside it: held behind it too.
    produce(broker, "txn-lso", [b"after"])
    assert values(read_all(broker, "txn-lso", 1, "read_uncommitted")) == [
        b"before", b"t0", b"t1", b"t2", b"after"]
    assert values(read_all(broker, "txn-lso", 1, "read_committed")) == [b"before"]
    assert list_offset(broker, "txn-lso", 0, IsolationLevel.READ_COMMITTED) == 1, "the LSO"
    assert list_offset(broker, "txn-lso", 0, IsolationLevel.READ_UNCOMMITTED) == 5
    producer.commit_transaction(WAIT_S)
    assert values(read_all(broker, "txn-lso", 1, "read_committed")) == [
        b"before", b"t0", b"t1", b"t2", b"after"]
    assert list_offset(broker, "txn-lso", 0, IsolationLevel.READ_COMMITTED) == 6


def test_consume_transform_produce_with_an_aborted_batch_redone(broker_factory):
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker, "ctp-in", 2)
    create_topic(broker, "ctp-out", 2)
    inputs = [f"in-{i}".encode() for i in range(20)]
    produce(broker, "ctp-in", inputs)
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "ctp",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        **QUIET,
    })
    producer = txn_producer(broker)
    aborted_once = False
    done = set()
    try:
        consumer.subscribe(["ctp-in"])
        deadline = time.monotonic() + WAIT_S * 2
        while len(done) < len(inputs):
            assert time.monotonic() < deadline, f"processed only {sorted(done)}"
            batch = consumer.consume(num_messages=7, timeout=1.0)
            batch = [m for m in batch if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for m in batch:
                producer.produce("ctp-out", key=m.value(), value=m.value().upper(),
                                 partition=m.partition())
            # Written to the log before the outcome is decided (an abort does not just drop
            # records still queued in the client).
            producer.flush(WAIT_S)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), WAIT_S)
            if not aborted_once:
                # The first batch fails: abort it and rewind to the committed offsets.
                aborted_once = True
                producer.abort_transaction(WAIT_S)
                for tp in consumer.committed(consumer.assignment(), timeout=WAIT_S):
                    consumer.seek(TopicPartition(tp.topic, tp.partition,
                                                 tp.offset if tp.offset >= 0 else 0))
                continue
            producer.commit_transaction(WAIT_S)
            done.update(m.value() for m in batch)
        committed = consumer.committed(
            [TopicPartition("ctp-in", p) for p in range(2)], timeout=WAIT_S)
    finally:
        consumer.close()
    out = values(read_all(broker, "ctp-out", 2, "read_committed"))
    assert sorted(out) == sorted(v.upper() for v in inputs), "every input exactly once"
    everything = values(read_all(broker, "ctp-out", 2, "read_uncommitted"))
    assert len(everything) > len(out), "the aborted batch was written, and not read committed"
    consumer_end = reader(broker, "read_committed")
    try:
        ends = [consumer_end.get_watermark_offsets(TopicPartition("ctp-in", p), timeout=WAIT_S)[1]
                for p in range(2)]
    finally:
        consumer_end.close()
    assert [tp.offset for tp in sorted(committed, key=lambda t: t.partition)] == ends


def start_zombie(broker, topic, txn_id):
    """A producer with an open transaction holding one flushed record."""
    zombie = txn_producer(broker, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(WAIT_S)
    return zombie


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    create_topic(broker, "txn-fence", 1)
    zombie = start_zombie(broker, "txn-fence", "tx-fence")
    successor = txn_producer(broker, "tx-fence")
    with pytest.raises(KafkaException) as raised:
        zombie.produce("txn-fence", value=b"zombie-2", partition=0)
        zombie.flush(WAIT_S)
        zombie.commit_transaction(WAIT_S)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                            KafkaError.INVALID_PRODUCER_EPOCH), error
    send_txn(successor, "txn-fence", [b"successor"], commit=True)
    assert b"successor" in values(read_all(broker, "txn-fence", 1, "read_committed"))


@pytest.mark.kfake_lacks("it lets the fenced producer's open transaction become visible; "
                         "Kafka aborts it when the successor initialises")
def test_a_fenced_producers_open_transaction_is_aborted(broker):
    create_topic(broker, "txn-fence-abort", 1)
    start_zombie(broker, "txn-fence-abort", "tx-fence-abort")
    successor = txn_producer(broker, "tx-fence-abort")
    send_txn(successor, "txn-fence-abort", [b"successor"], commit=True)
    assert values(read_all(broker, "txn-fence-abort", 1, "read_committed")) == [b"successor"]
    assert values(read_all(broker, "txn-fence-abort", 1, "read_uncommitted")) == [
        b"zombie", b"successor"]


def test_the_broker_aborts_a_timed_out_transaction(broker_factory):
    broker = broker_factory(transaction_abort_timed_out_transaction_cleanup_interval_ms=ABORT_CHECK_MS)
    create_topic(broker, "txn-timeout", 1)
    stale = txn_producer(broker, "tx-stale", **{"transaction.timeout.ms": 2000})
    stale.begin_transaction()
    stale.produce("txn-timeout", value=b"stale", partition=0)
    stale.flush(WAIT_S)
    # A later, committed transaction becomes readable only once the stale one is aborted
    # (until then the LSO stays at the stale record).
    fresh = txn_producer(broker, "tx-fresh")
    send_txn(fresh, "txn-timeout", [b"fresh"], commit=True)
    deadline = time.monotonic() + WAIT_S
    while True:
        seen = values(read_all(broker, "txn-timeout", 1, "read_committed", settle_s=0.5))
        if seen:
            break
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.5)
    assert seen == [b"fresh"], "the stale record is aborted, never read committed"
    with pytest.raises(KafkaException):
        stale.commit_transaction(WAIT_S)


# ------------------------------------------------------------------ kafka-python

def test_kafka_python_commit_and_abort(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTopicPartition

    create_topic(broker, "txn-kafka-python", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                             transactional_id=f"tx-kp-{uuid.uuid4().hex[:6]}")
    try:
        producer.init_transactions()
        for vals, commit in [([b"k0", b"k1"], True), ([b"kx"], False), ([b"k2"], True)]:
            producer.begin_transaction()
            for v in vals:
                producer.send("txn-kafka-python", value=v, partition=0)
            producer.flush(timeout=WAIT_S)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(timeout=WAIT_S)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        consumer.assign([KTopicPartition("txn-kafka-python", 0)])
        consumer.seek_to_beginning()
        got = [m.value for m in consumer]
    finally:
        consumer.close()
    assert got == [b"k0", b"k1", b"k2"]
    assert values(read_all(broker, "txn-kafka-python", 1, "read_committed")) == got


# ------------------------------------------------------------------ aiokafka

def test_aiokafka_commit_and_abort(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as ATopicPartition

    create_topic(broker, "txn-aiokafka", 1)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    transactional_id=f"tx-aio-{uuid.uuid4().hex[:6]}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("txn-aiokafka", b"a0", partition=0)
                await producer.send_and_wait("txn-aiokafka", b"a1", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait("txn-aiokafka", b"ax", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait("txn-aiokafka", b"a2", partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    isolation_level="read_committed", enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([ATopicPartition("txn-aiokafka", 0)])
            await consumer.seek_to_beginning()
            got = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 3 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    got.extend(r.value for r in records)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(run(), WAIT_S * 2))
    assert got == [b"a0", b"a1", b"a2"]
    assert values(read_all(broker, "txn-aiokafka", 1, "read_committed")) == got
