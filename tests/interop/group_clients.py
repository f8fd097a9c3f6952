"""confluent-kafka (librdkafka) helpers shared by the consumer-group interop tests.

Every wait here is bounded (``WAIT_S``) and fails with what it had seen so far; nothing asserts
how fast anything happens.
"""

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

WAIT_S = 30

# Group settings every test broker gets: no delay before the first rebalance of an empty
# group (Kafka's default is 3 s), so a test waits only for the group protocol itself.
GROUP_BROKER = {"group_initial_rebalance_delay_ms": "0"}

# Client settings that keep librdkafka's log to errors and its own telemetry off.
QUIET = {"log_level": 3, "enable.metrics.push": False}

# (group.protocol, assignor) pairs: the classic protocol with the client-side eager `range`
# and incremental `cooperative-sticky` assignors, and KIP-848's consumer protocol with the
# broker-side `uniform` and `range` assignors.
PROTOCOLS = [
    ("classic", "range"),
    ("classic", "cooperative-sticky"),
    ("consumer", "uniform"),
    ("consumer", "range"),
]


def protocol_id(param):
    return f"{param[0]}-{param[1]}"


def admin(broker):
    """The broker's AdminClient, made once and kept in ``broker.clients``: librdkafka fails
    the futures of a client that is garbage-collected before they resolve."""
    client = broker.clients.get("admin")
    if client is None:
        client = broker.clients["admin"] = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    return client


def create_topic(broker, name, partitions):
    futures = admin(broker).create_topics([NewTopic(name, partitions, 1)], operation_timeout=15)
    for future in futures.values():
        future.result(timeout=WAIT_S)


def produce(broker, topic, values, keys=None):
    """Sends ``values`` (bytes) with acks=all and waits until every one is acknowledged;
    returns ``{value: (partition, offset)}``."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
    placed = {}
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)
        else:
            placed[msg.value()] = (msg.partition(), msg.offset())

    for i, value in enumerate(values):
        key = keys[i] if keys is not None else value
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        producer.poll(0)
    left = producer.flush(WAIT_S)
    assert left == 0 and not failures, f"{left} records unsent, failures {failures[:5]}"
    return placed


def group_consumer(broker, group, protocol=("classic", "range"), **extra):
    """A subscribe-mode consumer in ``group`` with explicit commits and reading from the
    beginning when the group has no committed offset."""
    kind, assignor = protocol
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "group.protocol": kind,
        **QUIET,
    }
    if kind == "classic":
        conf["partition.assignment.strategy"] = assignor
        conf["session.timeout.ms"] = 6000
        conf["heartbeat.interval.ms"] = 500
    else:
        conf["group.remote.assignor"] = assignor
    conf.update(extra)
    return Consumer(conf)


def poll_values(consumer, count, limit_s=WAIT_S):
    """Polls until ``count`` records arrived; returns them as ``[(partition, offset, value)]``.
    Fails on a record error or when the bound passes first."""
    got = []
    deadline = time.monotonic() + limit_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} records in {limit_s} s"
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, f"consumer error: {msg.error()}"
        got.append((msg.partition(), msg.offset(), msg.value()))
    return got


def wait_assignment(consumers, partitions, limit_s=WAIT_S, each_owns=False):
    """Polls every consumer until their assignments are disjoint and together cover
    ``partitions`` (a set of ``(topic, partition)``), and with ``each_owns`` until every
    consumer owns some; returns each one's owned set and the records each read meanwhile
    (``[(partition, offset, value)]`` per consumer)."""
    deadline = time.monotonic() + limit_s
    read = [[] for _ in consumers]
    while True:
        owned = [{(tp.topic, tp.partition) for tp in c.assignment()} for c in consumers]
        union = set().union(*owned)
        covered = union == partitions and sum(len(o) for o in owned) == len(union)
        if covered and (all(owned) or not each_owns):
            return owned, read
        assert time.monotonic() < deadline, f"assignments {owned} never covered {sorted(partitions)}"
        for c, records in zip(consumers, read):
            msg = c.poll(0.1)
            if msg is not None:
                assert msg.error() is None, f"consumer error: {msg.error()}"
                records.append((msg.partition(), msg.offset(), msg.value()))


def committed_offsets(broker, group, topic, partitions):
    """The group's committed offsets per partition from OffsetFetch (AdminClient);
    ``OFFSET_INVALID`` (-1001) where none is committed."""
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    result = admin(broker).list_consumer_group_offsets(request)[group].result(timeout=WAIT_S)
    for tp in result.topic_partitions:
        assert tp.error is None, f"offset fetch error for {tp}: {tp.error}"
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def end_offsets(broker, topic, partitions):
    """High watermarks per partition (ListOffsets through AdminClient: no group involved)."""
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    futures = admin(broker).list_offsets(request)
    return {tp.partition: f.result(timeout=WAIT_S).offset for tp, f in futures.items()}
