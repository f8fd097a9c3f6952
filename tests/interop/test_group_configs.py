"""confluent-kafka (librdkafka) AdminClient and KIP-848 group configurations: describe_configs
of a GROUP resource lists consumer.session.timeout.ms and consumer.heartbeat.interval.ms with
the broker's defaults; incremental_alter_configs sets them within the broker's bounds (a value
outside them is INVALID_CONFIG), DELETE returns to the default, and what is set survives a
restart. Against kfake (INTEROP_BROKER=kfake) only the bounds and defaults differ."""

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType,
)

from group_clients import QUIET

TIMEOUT_S = 15
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"


def admin(broker):
    """The broker's AdminClient, kept while results are awaited (one dropped destroys them)."""
    client = broker.clients.get("admin")
    if client is None:
        client = broker.clients["admin"] = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    return client


def described(broker, group):
    """{name: (value, source)} of the group's configurations."""
    resource = ConfigResource(ResourceType.GROUP, group)
    entries = admin(broker).describe_configs([resource])[resource].result(TIMEOUT_S)
    return {name: (e.value, ConfigSource(e.source)) for name, e in entries.items()}


def alter(broker, group, *ops):
    """Applies ``(name, op, value)`` operations to the group; raises KafkaException if refused."""
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, op, value in ops]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin(broker).incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def consumer_values(broker, group):
    """{name: value} of the group's consumer-protocol configurations (a broker with share
    groups lists its share.* ones too)."""
    return {k: v for k, (v, _) in described(broker, group).items() if k in (SESSION, HEARTBEAT)}


def test_group_configs_are_altered_and_kept(broker):
    alter(
        broker, "cfg-group",
        (SESSION, AlterConfigOpType.SET, "55000"), (HEARTBEAT, AlterConfigOpType.SET, "7000"),
    )
    expected = {SESSION: "55000", HEARTBEAT: "7000"}
    assert consumer_values(broker, "cfg-group") == expected
    assert described(broker, "cfg-group")[SESSION][1] == ConfigSource.GROUP_CONFIG
    broker.restart()
    assert consumer_values(broker, "cfg-group") == expected
    alter(broker, "cfg-group", (SESSION, AlterConfigOpType.DELETE, None))
    assert consumer_values(broker, "cfg-group")[HEARTBEAT] == "7000"
    assert described(broker, "cfg-group")[SESSION][1] == ConfigSource.DEFAULT_CONFIG


@pytest.mark.kfake_lacks("describes group config defaults without a value and accepts any timeout")
def test_group_config_defaults_and_bounds_follow_the_broker(broker_factory):
    broker = broker_factory(group_consumer_session_timeout_ms="50000")
    assert consumer_values(broker, "cfg-group") == {SESSION: "50000", HEARTBEAT: "5000"}
    for value in ("1000", "60001"):
        with pytest.raises(KafkaException) as refused:
            alter(broker, "cfg-group", (SESSION, AlterConfigOpType.SET, value))
        assert refused.value.args[0].name() == "INVALID_CONFIG", refused.value
    assert consumer_values(broker, "cfg-group")[SESSION] == "50000"
