"""kafka-python's admin and consumer against the describe APIs: DescribeLogDirs,
DescribeTopicPartitions (KIP-966 paging), DescribeProducers, and the consumer's KIP-320
position validation through OffsetForLeaderEpoch."""

import time

import pytest

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import NewTopic

WAIT_S = 30


def admin_for(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)


def create_topics(admin, topics):
    admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics], timeout_ms=15000)


def produce(broker, topic, partition, count, idempotent=False, first=0):
    """Produces `count` records to `topic`/`partition`; they must land at `first` on."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=idempotent)
    futures = [producer.send(topic, value=f"v{i}".encode(), partition=partition) for i in range(count)]
    offsets = [f.get(timeout=WAIT_S).offset for f in futures]
    producer.close(timeout=10)
    assert offsets == list(range(first, first + count))


@pytest.mark.minikafka_only("compares sizes with minikafka's segment files")
def test_describe_log_dirs_sizes_match_the_segment_files(broker):
    """describe_log_dirs: one data directory; a written partition's size is the bytes of its
    segment files on disk, an empty one's is 0."""
    admin = admin_for(broker)
    try:
        create_topics(admin, [("py-dirs", 2)])
        produce(broker, "py-dirs", 0, 40)
        on_disk = sum(p.stat().st_size for p in (broker.data_dir / "py-dirs-0").glob("*.log"))
        assert on_disk > 0
        (answer,) = admin.describe_log_dirs({"py-dirs": [0, 1]})
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == str(broker.data_dir.resolve())
        sizes = {
            p["partition_index"]: p["partition_size"]
            for t in log_dir["topics"]
            if t["name"] == "py-dirs"
            for p in t["partitions"]
        }
        assert sizes == {0: on_disk, 1: 0}
    finally:
        admin.close()


def test_describe_topic_partitions_pages_every_partition_once(broker):
    """describe_topic_partitions with a limit of 2 partitions per page: following next_cursor
    visits every partition of the named topics once, in name order."""
    admin = admin_for(broker)
    try:
        create_topics(admin, [("py-page-a", 3), ("py-page-b", 2)])
        seen, cursor = [], None
        for _ in range(10):
            page = admin.describe_topic_partitions(["py-page-b", "py-page-a"], 2, cursor)
            count = 0
            for t in page["topics"]:
                assert t["error_code"] == 0
                for p in t["partitions"]:
                    seen.append((t["name"], p["partition_index"]))
                    assert p["leader_epoch"] == 0
                    count += 1
            assert count <= 2
            cursor = page["next_cursor"]
            if cursor is None:
                break
        want = [("py-page-a", p) for p in range(3)] + [("py-page-b", p) for p in range(2)]
        assert seen == want
    finally:
        admin.close()


@pytest.mark.kfake_lacks("its DescribeProducers lists no active producers")
def test_describe_producers_lists_the_idempotent_producer(broker):
    """describe_producers: kafka-python's idempotent producer (50 records, so its last
    sequence is 49) is listed on the partition it wrote; a plain producer's is not."""
    admin = admin_for(broker)
    try:
        create_topics(admin, [("py-producers", 2)])
        produce(broker, "py-producers", 0, 50, idempotent=True)
        produce(broker, "py-producers", 1, 5, idempotent=False)
        tps = [TopicPartition("py-producers", 0), TopicPartition("py-producers", 1)]
        states = admin.describe_producers(tps)
        (producer,) = states[tps[0]].active_producers
        assert producer.producer_id >= 0
        assert producer.producer_epoch == 0
        assert producer.last_sequence == 49
        assert producer.last_timestamp > 0
        assert states[tps[1]].active_producers == []
    finally:
        admin.close()


def poll_until(consumer, count):
    records = []
    deadline = time.monotonic() + WAIT_S
    while len(records) < count:
        assert time.monotonic() < deadline, f"got {len(records)} of {count} records"
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    return records


def test_consumer_position_validation_uses_offset_for_leader_epoch(broker):
    """KIP-320: a consumer validating its position (epoch 0, from the batches it fetched and
    from Metadata) sends OffsetForLeaderEpoch. A position at the log end is valid and
    consumption continues; a position past the log end is detected as truncation and moved
    back to the end offset the broker names."""
    admin = admin_for(broker)
    try:
        create_topics(admin, [("py-epochs", 1)])
    finally:
        admin.close()
    produce(broker, "py-epochs", 0, 10)
    tp = TopicPartition("py-epochs", 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert [r.offset for r in poll_until(consumer, 10)] == list(range(10))
        # The client validates by itself only after a leader change, which a single node
        # never has; ask its subscription state for the validation it would then make.
        subscription = consumer._subscription
        assert subscription.request_position_validation(tp), "position has epoch 0"
        produce(broker, "py-epochs", 0, 2, first=10)
        assert [r.offset for r in poll_until(consumer, 2)] == [10, 11]

        # A position past the end of epoch 0 (as after an unclean leader change elsewhere):
        # the broker names epoch 0's end offset, and the client (with a reset policy) moves
        # back to that diverging point instead of skipping what is appended next.
        subscription.seek(tp, OffsetAndMetadata(15, "", 0))
        assert subscription.request_position_validation(tp)
        deadline = time.monotonic() + WAIT_S
        while subscription.assignment[tp].position.offset != 12:
            assert time.monotonic() < deadline, "validation never moved the position"
            consumer.poll(timeout_ms=200)
        produce(broker, "py-epochs", 0, 1, first=12)
        assert [r.offset for r in poll_until(consumer, 1)] == [12]
    finally:
        consumer.close()
