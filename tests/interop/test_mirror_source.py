"""kafka-python's admin client plays the calls MirrorMaker 2 makes of a source cluster
(docs/SCALING.md, "What MirrorMaker 2 needs from us"): list and describe the topics, read
their configs, list the groups and their committed offsets, create a compacted one-partition
internal topic (replication factor 3 refused on one broker, 1 accepted, I143), and describe
groups at DescribeGroups v6, where an unknown group is GROUP_ID_NOT_FOUND (I142)."""

import pytest

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import InvalidReplicationFactorError

WAIT_S = 30


def test_mirror_maker_2_source_calls(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        # Configs set after creation: kafka-python cannot read the configs kfake returns in a
        # CreateTopics answer (config_source -1); server_smoke.rs sends them in CreateTopics.
        admin.create_topics({"mm2-src": {"num_partitions": 2, "replication_factor": 1}}, timeout_ms=15000)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "mm2-src", {"retention.ms": "604800001"})])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        for i in range(20):
            producer.send("mm2-src", value=f"v{i}".encode(), partition=i % 2).get(timeout=WAIT_S)
        producer.close(timeout=10)
        # A group that committed and left: what the checkpoint connector finds and translates.
        committed = {TopicPartition("mm2-src", 0): 4, TopicPartition("mm2-src", 1): 7}
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="mm2-readers", enable_auto_commit=False)
        consumer.assign(list(committed))
        consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in committed.items()})
        consumer.close()

        # MirrorSourceConnector: listTopics, describeTopics, describeConfigs.
        assert "mm2-src" in admin.list_topics()
        (described,) = admin.describe_topics(["mm2-src"])
        assert described["error_code"] == 0 and len(described["partitions"]) == 2, described
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "mm2-src")])
        assert configs["topic"]["mm2-src"]["retention.ms"]["value"] == "604800001"

        # MirrorCheckpointConnector/Task: listConsumerGroups, listConsumerGroupOffsets.
        assert "mm2-readers" in [g["group_id"] for g in admin.list_groups()]
        offsets = admin.list_group_offsets({"mm2-readers": None})["mm2-readers"]
        assert {tp: o.offset for tp, o in offsets.items()} == committed

        # Shadowing and Cluster Linking describe groups; kafka-python asks at v6 where served.
        groups = admin.describe_groups(["mm2-readers", "mm2-nobody"])
        assert groups["mm2-readers"]["error"] is None
        assert groups["mm2-readers"]["group_state"] == "Empty"
        assert "GroupIdNotFound" in (groups["mm2-nobody"]["error"] or "Dead, no error"), groups["mm2-nobody"]
        # (Kafka's message, `Group mm2-nobody not found.`, is checked in server_smoke.rs: kfake
        # sends none.)

        # MirrorUtils.createCompactedTopic: MM2's default replication factor 3 is refused on
        # one broker; 1 creates the compacted topic.
        syncs = "mm2-offset-syncs.kafka.internal"
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics(
                {syncs: {"num_partitions": 1, "replication_factor": 3, "configs": {"cleanup.policy": "compact"}}},
                timeout_ms=15000,
            )
        assert syncs not in admin.list_topics()
        admin.create_topics({syncs: {"num_partitions": 1, "replication_factor": 1}}, timeout_ms=15000)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, syncs, {"cleanup.policy": "compact"})])
        configs = admin.describe_configs(
[ConfigResource(ConfigResourceType.TOPIC, syncs)])
        assert configs["topic"][syncs]["cleanup.policy"]["value"] == "compact"
    finally:
        admin.close()
