"""kafka-python's KafkaAdminClient against the broker: alter_configs (IncrementalAlterConfigs
and the legacy AlterConfigs) for topics, the broker and its loggers, describe_configs sources, and
delete_records; every stored change must hold across a clean restart and a crash (logger
levels, as in Kafka, last until the broker stops)."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import OffsetOutOfRangeError

TIMEOUT_MS = 15000


def admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)


def topic_resource(name, configs=None):
    return ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)


def described(client, resource):
    """{name: (value, source, read_only)} of every setting of one resource."""
    result = client.describe_configs([resource], config_filter="all")
    kind = next(iter(result))
    entries = result[kind][resource.name]
    return {k: (v["value"], v["config_source"], v["read_only"]) for k, v in entries.items()}


def outcome(result, resource):
    """The per-resource outcome string kafka-python returns ('OK' or the error)."""
    return result[next(iter(result))][resource.name]


@pytest.mark.kfake_lacks("accepts a topic config name Kafka does not define")
@pytest.mark.parametrize("incremental", [True, False])
def test_alter_topic_configs_is_live_validated_and_durable(broker, incremental):
    client = admin(broker)
    try:
        client.create_topics([NewTopic("conf", 1, 1)], timeout_ms=TIMEOUT_MS)
        change = topic_resource("conf", {"retention.ms": "123456", "segment.bytes": "8192"})
        assert outcome(client.alter_configs([change], incremental=incremental), change) == "OK"
        refused = topic_resource("conf", {"retention.msec": "1"})
        answer = outcome(
            client.alter_configs([refused], incremental=incremental, raise_on_unknown=False), refused
        )
        assert "InvalidConfigurationError" in answer and "retention.msec" in answer, answer
        dry = topic_resource("conf", {"retention.ms": "1", "segment.bytes": "8192"})
        assert outcome(client.alter_configs([dry], validate_only=True, incremental=incremental), dry) == "OK"
    finally:
        client.close()

    def check(when):
        client = admin(broker)
        try:
            entries = described(client, topic_resource("conf"))
        finally:
            client.close()
        assert entries["retention.ms"][:2] == ("123456", "DYNAMIC_TOPIC_CONFIG"), when
        assert entries["segment.bytes"][:2] == ("8192", "DYNAMIC_TOPIC_CONFIG"), when
        assert "retention.msec" not in entries, when

    check("live")
    broker.restart()
    check("after a clean restart")
    broker.crash_restart()
    check("after a crash")


@pytest.mark.kfake_lacks("accepts an alteration of a read-only broker setting")
def test_alter_broker_configs_only_dynamic_ones(broker):
    client = admin(broker)
    node = ConfigResource(ConfigResourceType.BROKER, "0")
    try:
        client.create_topics([NewTopic("follower", 1, 1)], timeout_ms=TIMEOUT_MS)
        change = ConfigResource(ConfigResourceType.BROKER, "0", configs={"log.retention.ms": "7777"})
        assert outcome(client.alter_configs([change]), change) == "OK"
        read_only = ConfigResource(ConfigResourceType.BROKER, "0", configs={"num.partitions": "9"})
        answer = outcome(client.alter_configs([read_only], raise_on_unknown=False), read_only)
        assert "InvalidRequestError" in answer and "num.partitions" in answer, answer
        entries = described(client, node)
        assert entries["log.retention.ms"] == ("7777", "DYNAMIC_BROKER_CONFIG", False)
        assert entries["num.partitions"][1:] == ("DEFAULT_CONFIG", True)
        topic = described(client, topic_resource("follower"))
        assert topic["retention.ms"][:2] == ("7777", "DYNAMIC_BROKER_CONFIG")
    finally:
        client.close()
    broker.restart()
    client = admin(broker)
    try:
        assert described(client, node)["log.retention.ms"][:2] == ("7777", "DYNAMIC_BROKER_CONFIG")
    finally:
        client.close()


def earliest(broker, tp):
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, request_timeout_ms=30000)
    try:
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


@pytest.mark.kfake_lacks("loses the log start offset in a crash")
def test_delete_records_moves_the_log_start_durably(broker):
    tp = TopicPartition("trim", 0)
    client = admin(broker)
    try:
        client.create_topics([NewTopic("trim", 1, 1)], timeout_ms=TIMEOUT_MS)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        try:
            for i in range(20):
                producer.send("trim", b"v%d" % i, partition=0).get(timeout=30)
        finally:
            producer.close()
        result = client.delete_records({tp: 7}, timeout_ms=TIMEOUT_MS)
        assert result[tp]["low_watermark"] == 7 and result[tp]["error_code"] == 0, result
        with pytest.raises(OffsetOutOfRangeError):
            client.delete_records({tp: 21}, timeout_ms=TIMEOUT_MS)
    finally:
        client.close()
    assert earliest(broker, tp) == 7
    broker.crash_restart()
    assert earliest(broker, tp) == 7, "the log start came back after a crash"
    client = admin(broker)
    try:
        result = client.delete_records({tp: -1}, timeout_ms=TIMEOUT_MS)
        assert result[tp]["low_watermark"] == 20, result
    finally:
        client.close()
    broker.restart()
    assert earliest(broker, tp) == 20


@pytest.mark.kfake_lacks("answers no broker loggers")
def test_broker_logger_levels_change_at_run_time(broker):
    """kafka-configs.sh --entity-type broker-loggers: the levels are described, SET changes one
    at run time, a level Kafka does not name is refused."""
    client = admin(broker)
    try:
        loggers = lambda configs=None: ConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs=configs)
        before = described(client, loggers())
        assert before["root"][0] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"), before
        change = loggers({"minikafka_broker": "TRACE"})
        assert outcome(client.alter_configs([change], incremental=True), change) == "OK"
        assert described(client, loggers())["minikafka_broker"][0] == "TRACE"
        refused = loggers({"minikafka_broker": "LOUD"})
        answer = outcome(client.alter_configs([refused], incremental=True, raise_on_unknown=False), refused)
        assert "InvalidConfigurationError" in answer, answer
        assert described(client, loggers())["minikafka_broker"][0] == "TRACE"
    finally:
        client.close()
