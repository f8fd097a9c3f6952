"""confluent-kafka (librdkafka) against two answers Kafka gives that clients act on:

- KIP-430 authorized operations: AdminClient's describe_cluster, describe_topics and
  describe_consumer_groups with ``include_authorized_operations`` get every operation of the
  resource type (what Kafka grants with no authorizer), and ``None`` when they do not ask.
- KIP-467 per-record errors: a batch with some invalid records is refused whole; the producer
  fails the invalid records with their own error and the others with
  _INVALID_DIFFERENT_RECORD, which it could only tell apart from the response's
  ``record_errors``.
"""

import time

import pytest
from confluent_kafka import KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource, NewTopic, OffsetSpec

from group_clients import QUIET, WAIT_S, group_consumer

TOPIC_OPS = {
    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPS = {
    AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
    AclOperation.DESCRIBE,
}
GROUP_OPS = {
    AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
}


def admin_for(broker):
    client = broker.clients.get("admin")
    if client is None:
        client = broker.clients["admin"] = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    return client


def create_topic(broker, name, partitions=1, config=None):
    futures = admin_for(broker).create_topics(
        [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=15)
    for future in futures.values():
        future.result(timeout=WAIT_S)


@pytest.mark.kfake_lacks("it grants READ, WRITE and DELETE on the cluster too, which Kafka does not")
def test_describe_cluster_and_topics_answer_every_operation_only_when_asked(broker):
    admin = admin_for(broker)
    create_topic(broker, "ops-topic", 2)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=WAIT_S)
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    cluster = admin.describe_cluster(include_authorized_operations=False).result(timeout=WAIT_S)
    assert cluster.authorized_operations is None

    for ask, want in [(True, TOPIC_OPS), (False, None)]:
        futures = admin.describe_topics(TopicCollection(["ops-topic"]), include_authorized_operations=ask)
        description = futures["ops-topic"].result(timeout=WAIT_S)
        assert len(description.partitions) == 2
        got = description.authorized_operations
        assert (set(got) if got is not None else None) == want


@pytest.mark.kfake_lacks("it answers Kafka 3.x's group operations, without the 4.0 config ones")
def test_describe_consumer_groups_answers_every_group_operation_only_when_asked(broker):
    create_topic(broker, "ops-group-topic", 1)
    consumer = group_consumer(broker, "ops-group")
    try:
        consumer.subscribe(["ops-group-topic"])
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never got its assignment"
            consumer.poll(0.2)
        admin = admin_for(broker)
        for ask, want in [(True, GROUP_OPS), (False, None)]:
            futures = admin.describe_consumer_groups(["ops-group"], include_authorized_operations=ask)
            group = futures["ops-group"].result(timeout=WAIT_S)
            got = group.authorized_operations
            assert (set(got) if got is not None else None) == want
    finally:
        consumer.close()


def produce_one_batch(broker, topic, records):
    """Produces ``records`` (key, value, timestamp_ms) to partition 0 in one batch (a long
    linger, flushed at once); returns each record's delivery error code, or None."""
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 60000,
        "batch.num.messages": len(records), "retries": 0, **QUIET,
    })
    outcome = {}

    def on_delivery(err, msg):
        outcome[msg.value()] = err.code() if err is not None else None

    # Learn the partition's leader first: a record produced before the metadata answer waits
    # in librdkafka's unassigned queue, and one moved from there only after flush() began goes
    # out in a batch of its own (seen once in CI: the first record delivered alone).
    producer.list_topics(topic, timeout=WAIT_S)
    for key, value, timestamp_ms in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery,
                         timestamp=timestamp_ms or 0)
    assert producer.flush(WAIT_S) == 0
    return outcome


@pytest.mark.kfake_lacks("it accepts keyless records on a compacted topic")
def test_keyless_records_on_a_compacted_topic_fail_alone_and_their_batch_mates_are_told_why(broker):
    create_topic(broker, "kip467-compacted", 1, {"cleanup.policy": "compact"})
    records = [(None if i % 4 == 0 else b"k%d" % i, b"v%d" % i, None) for i in range(12)]
    outcome = produce_one_batch(broker, "kip467-compacted", records)
    for key, value, _ in records:
        want = KafkaError.INVALID_RECORD if key is None else KafkaError._INVALID_DIFFERENT_RECORD
        assert outcome[value] == want, (value, outcome[value])
    # Nothing of the refused batch was appended; a batch of keyed records is.
    outcome = produce_one_batch(broker, "kip467-compacted", [(b"k", b"later", None)])
    assert outcome == {b"later": None}
    admin = admin_for(broker)
    offsets = admin.list_offsets({TopicPartition("kip467-compacted", 0): OffsetSpec.latest()})
    (info,) = [f.result(timeout=WAIT_S) for f in offsets.values()]
    assert info.offset == 1


@pytest.mark.kfake_lacks("it does not bound record timestamps")
def test_timestamps_outside_the_topics_window_fail_alone(broker):
    create_topic(broker, "kip467-timestamps", 1, {"message.timestamp.before.max.ms": "3600000"})
    now_ms = int(time.time() * 1000)
    day_ms = 24 * 3600 * 1000
    records = [(b"k0", b"fresh", now_ms), (b"k1", b"old", now_ms - day_ms),
               (b"k2", b"fresh2", now_ms), (b"k3", b"old2", now_ms - 2 * day_ms)]
    outcome = produce_one_batch(broker, "kip467-timestamps", records)
    # librdkafka names the failing records INVALID_RECORD when the response lists more than
    # one (with one, it gives every record of the batch the partition's code, INVALID_TIMESTAMP).
    assert outcome == {
        b"fresh": KafkaError._INVALID_DIFFERENT_RECORD,
        b"old": KafkaError.INVALID_RECORD,
        b"fresh2": KafkaError._INVALID_DIFFERENT_RECORD,
        b"old2": KafkaError.INVALID_RECORD,
    }
    outcome = produce_one_batch(broker, "kip467-timestamps", records[1:2])
    assert outcome == {b"old": KafkaError.INVALID_TIMESTAMP}
    # The window is the topic's: after widening it, the old records are accepted.
    admin = admin_for(broker)
    resource = ConfigResource("topic", "kip467-timestamps",
                              set_config={"message.timestamp.before.max.ms": str(3 * day_ms)})
    for future in admin.alter_configs([resource]).values():
        future.result(timeout=WAIT_S)
    outcome = produce_one_batch(broker, "kip467-timestamps", records)
    assert set(outcome.values()) == {None}
