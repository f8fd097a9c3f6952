"""Client quotas through kafka-python: DescribeClientQuotas / AlterClientQuotas as its own
protocol classes encode them and its connection manager negotiates and sends them (kafka-python
3.0 has the messages but no public admin call for them; its admin mixins send theirs the same
way), the quotas stored across a crash, and a kafka-python producer over its
``producer_byte_rate`` told so in ``throttle_time_ms`` (its ``throttle-time-max`` metric).

confluent-kafka (librdkafka) and aiokafka have no client-quota admin call; librdkafka's produce
rate under a quota is checked in ``broker/tests/quotas.rs``.
"""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

TIMEOUT_MS = 15_000
INVALID_REQUEST = 42

Entry = AlterClientQuotasRequest.EntryData


def send(admin, request):
    """One request through kafka-python's connection manager (version negotiated)."""

    async def call():
        return await admin._manager.send(request)

    return admin._manager.run(call)


def alter(admin, entity, ops, validate_only=False):
    """[(error code, message)] of one entry: ``entity`` is [(type, name or None)], ``ops``
    [(key, value or None to remove)]."""
    entry = Entry(
        entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[
            Entry.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
            for k, v in ops
        ],
    )
    response = send(admin, AlterClientQuotasRequest(entries=[entry], validate_only=validate_only))
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(admin, components=(), strict=False):
    """{((type, name), ...): {key: value}} of the entities the filter selects."""
    request = DescribeClientQuotasRequest(
        components=[
            DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n)
            for t, m, n in components
        ],
        strict=strict,
    )
    response = send(admin, request)
    assert response.error_code == 0, response.error_message
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries or []
    }


def test_kafka_python_alters_describes_and_removes_quotas_that_survive_a_crash(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        assert alter(admin, [("user", "alice")], [("producer_byte_rate", 1024), ("consumer_byte_rate", 2048)]) == [
            (0, None)
        ]
        assert alter(admin, [("user", None), ("client-id", "app")], [("producer_byte_rate", 4096)]) == [(0, None)]
        # validate_only changes nothing.
        assert alter(admin, [("user", "bob")], [("producer_byte_rate", 1)], validate_only=True) == [(0, None)]
        expected = {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            (("client-id", "app"), ("user", None)): {"producer_byte_rate": 4096.0},
        }
        assert describe(admin) == expected
        assert describe(admin, [("user", 0, "alice")], strict=True) == {
            (("user", "alice"),): expected[(("user", "alice"),)]
        }
        assert describe(admin, [("user", 1, None)]) == {
            (("client-id", "app"), ("user", None)): {"producer_byte_rate": 4096.0}
        }
        assert alter(admin, [("user", "alice")], [("consumer_byte_rate", None)]) == [(0, None)]
    finally:
        admin.close()
    broker.crash_restart()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        assert describe(admin) == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0},
            (("client-id", "app"), ("user", None)): {"producer_byte_rate": 4096.0},
        }
    finally:
        admin.close()


@pytest.mark.kfake_lacks("kfake accepts any quota key")
def test_an_unknown_quota_key_is_invalid_request_and_changes_nothing(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        [(code, message)] = alter(admin, [("user", "bob")], [("no_such_quota", 1)])
        assert code == INVALID_REQUEST, message
        assert describe(admin) == {}
    finally:
        admin.close()


@pytest.mark.kfake_lacks("kfake stores client quotas but does not throttle")
def test_a_kafka_python_producer_over_its_byte_rate_is_told_its_throttle_time(broker_factory):
    # Two samples of one second: a throttle is at most 2 s.
    broker = broker_factory(quota_window_num="2", quota_window_size_seconds="1")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        admin.create_topics([NewTopic("kp-quota", 1, 1)])
        assert alter(admin, [("client-id", "kp-throttled")], [("producer_byte_rate", 10240)]) == [(0, None)]
    finally:
        admin.close()
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        client_id="kp-throttled",
        linger_ms=5,
        request_timeout_ms=TIMEOUT_MS,
    )
    try:
        value = b"q" * 1000
        futures = [producer.send("kp-quota", value, partition=0) for _ in range(100)]
        offsets = [f.get(timeout=60).offset for f in futures]
        assert offsets == list(range(100))
        throttle_max = [
            v
            for name, v in ((k, v) for group in producer.metrics().values() for k, v in group.items())
            if name == "throttle-time-max"
        ]
        assert throttle_max and max(throttle_max) > 0, producer.metrics()
    finally:
        producer.close()


def test_kafka_python_sets_ip_connection_rates_and_request_percentages(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        assert alter(admin, [("ip", "10.1.2.3")], [("connection_creation_rate", 30)]) == [(0, None)]
        assert alter(admin, [("ip", None)], [("connection_creation_rate", 100)]) == [(0, None)]
        assert alter(admin, [("client-id", "app")], [("request_percentage", 12.5)]) == [(0, None)]
        assert describe(admin, [("ip", 0, "10.1.2.3")], strict=True) == {
            (("ip", "10.1.2.3"),): {"connection_creation_rate": 30.0}
        }
        assert describe(admin, [("ip", 1, None)], strict=True) == {
            (("ip", None),): {"connection_creation_rate": 100.0}
        }
        assert describe(admin, [("client-id", 0, "app")], strict=True) == {
            (("client-id", "app"),): {"request_percentage": 12.5}
        }
        assert alter(admin, [("ip", "10.1.2.3")], [("connection_creation_rate", None)]) == [(0, None)]
        assert describe(admin, [("ip", 0, "10.1.2.3")]) == {}
    finally:
        admin.close()


@pytest.mark.kfake_lacks("kfake accepts any quota value")
def test_bad_ip_and_request_quota_values_are_invalid_request(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        for entity, key, value in [
            ([("ip", "10.1.2.3")], "connection_creation_rate", 2.5),
            ([("ip", "10.1.2.3")], "connection_creation_rate", -1),
            ([("ip", None)], "connection_creation_rate", 1e12),
            ([("client-id", "app")], "request_percentage", 0),
            ([("client-id", "app")], "request_percentage", float("nan")),
        ]:
            [(code, message)] = alter(admin, entity, [(key, value)])
            assert code == INVALID_REQUEST, (entity, key, value, message)
        assert describe(admin) == {}
    finally:
        admin.close()


@pytest.mark.kfake_lacks("kfake stores client quotas but does not throttle")
def test_a_kafka_python_consumer_over_its_request_percentage_is_told_its_throttle_time(broker_factory):
    broker = broker_factory(quota_window_num="2", quota_window_size_seconds="1")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        admin.create_topics([NewTopic("kp-busy", 1, 1)])
        # A thousandth of a percent of one thread: the consumer's fetches exceed it at once.
        assert alter(admin, [("client-id", "kp-busy")], [("request_percentage", 0.001)]) == [(0, None)]
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        for i in range(20):
            producer.send("kp-busy", b"%d" % i, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        "kp-busy",
        bootstrap_servers=broker.bootstrap,
        client_id="kp-busy",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20_000,
        request_timeout_ms=TIMEOUT_MS,
    )
    try:
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 20:
                break
        # Every record, in order, despite the throttled (patched) answers.
        assert values == [b"%d" % i for i in range(20)]
        throttle_max = [
            v
            for name, v in ((k, v) for group in consumer.metrics().values() for k, v in group.items())
            if name == "throttle-time-max"
        ]
        assert throttle_max and max(throttle_max) > 0, consumer.metrics()
    finally:
        consumer.close()
