"""The ACL APIs with no authorizer configured, through real admin clients: confluent-kafka
(librdkafka) and kafka-python. Apache Kafka without ``authorizer.class.name`` lists
DescribeAcls, CreateAcls and DeleteAcls in ApiVersions and answers each with
SECURITY_DISABLED (54, "No Authorizer is configured."): DescribeAcls at the top level,
CreateAcls once per creation, DeleteAcls once per filter with nothing matched. Tools that ask
"is security on?" (MirrorMaker 2's ACL sync, UI tools' ACL pages) rely on that answer.

Where kfake differs from Kafka: kfake keeps an ACL store with no authorizer in front of it, so
it lists ACLs (none), accepts creations and deletes them again instead of answering
SECURITY_DISABLED; the tests that check Kafka's answer are ``kfake_lacks`` (a strict xfail on
kfake, which still runs them). The ApiVersions listing holds on both.

With ``authorizer.class.name`` set (the second half), confluent-kafka's AdminClient creates,
describes and deletes ACLs, they survive a crash, and a producer, a consumer and a group
member that the ACLs deny get Kafka's codes. kfake stores ACLs but does not enforce them for
an unauthenticated client, nor apply MATCH filters as Kafka does: those are ``kfake_lacks``.
"""

import socket
import struct

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import SecurityDisabledError

from conftest import BROKER_KIND

TIMEOUT_S = 15
SECURITY_DISABLED = 54
KAFKA_LACKS_AUTHORIZER = "kfake keeps ACLs without an authorizer instead of answering SECURITY_DISABLED"
ACL_KEYS = {29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls"}


def api_versions(bootstrap):
    """{api key: (min, max)} from a raw ApiVersions v0 exchange."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as s:
        client_id = b"acl-test"
        body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
        s.sendall(struct.pack(">i", len(body)) + body)

        def read(n):
            data = b""
            while len(data) < n:
                chunk = s.recv(n - len(data))
                assert chunk, "connection closed during ApiVersions"
                data += chunk
            return data

        (size,) = struct.unpack(">i", read(4))
        answer = read(size)
    correlation_id, error_code, count = struct.unpack(">ihi", answer[:10])
    assert (correlation_id, error_code) == (7, 0)
    rows = [struct.unpack(">hhh", answer[10 + 6 * i:16 + 6 * i]) for i in range(count)]
    return {key: (low, high) for key, low, high in rows}


def test_api_versions_lists_the_acl_apis(broker):
    listed = api_versions(broker.bootstrap)
    for key, name in ACL_KEYS.items():
        assert key in listed, f"{name} not listed"
        low, high = listed[key]
        assert low <= 1 and high >= 3, f"{name} lists {low}..{high}"
        if BROKER_KIND == "minikafka":
            # Kafka 4 dropped v0 of all three (KIP-896); so does kafka-protocol 0.18.
            assert (low, high) == (1, 3), f"{name} lists {low}..{high}"


def confluent_admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def any_acl_filter():
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def read_acl(topic):
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)


def kafka_error(future):
    """The KafkaError a confluent-kafka future failed with (fails the test if it succeeded)."""
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_S)
    return raised.value.args[0]


@pytest.mark.kfake_lacks(KAFKA_LACKS_AUTHORIZER)
def test_confluent_describe_create_delete_acls_answer_security_disabled(broker):
    admin = confluent_admin(broker)
    # librdkafka (2.12 to at least 2.15) reads DescribeAcls' top-level error code and drops it
    # (`rd_kafka_DescribeAclsResponse_parse` returns NO_ERROR whatever the code): against
    # Apache Kafka without an authorizer, as here, describe_acls is an empty success. The
    # error itself is checked through kafka-python below and byte for byte in
    # broker/tests/acls_disabled.rs.
    assert admin.describe_acls(any_acl_filter(), request_timeout=TIMEOUT_S).result() == []

    bindings = [read_acl("acl-a"), read_acl("acl-b")]
    created = admin.create_acls(bindings, request_timeout=TIMEOUT_S)
    assert set(created) == set(bindings)
    for binding, future in created.items():
        assert kafka_error(future).code() == KafkaError.SECURITY_DISABLED, binding

    deleted = admin.delete_acls([any_acl_filter()], request_timeout=TIMEOUT_S)
    for acl_filter, future in deleted.items():
        assert kafka_error(future).code() == KafkaError.SECURITY_DISABLED, acl_filter

    # The connection and the broker keep serving.
    assert admin.list_topics(timeout=TIMEOUT_S).brokers


def kafka_python_admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def kp_any_filter():
    return ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                     permission_type=ACLPermissionType.ANY,
                     resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                            ACLResourcePatternType.ANY))


@pytest.mark.kfake_lacks(KAFKA_LACKS_AUTHORIZER)
def test_kafka_python_describe_create_delete_acls_answer_security_disabled(broker):
    admin = kafka_python_admin(broker)
    try:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(kp_any_filter())

        acls = [
            ACL(principal="User:bob", host="*", operation=op, permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(KpResourceType.TOPIC, "acl-kp",
                                                 ACLResourcePatternType.LITERAL))
            for op in (ACLOperation.READ, ACLOperation.WRITE, ACLOperation.DESCRIBE)
        ]
        created = admin.create_acls(acls)
        assert created["succeeded"] == []
        assert created["failed"] == [SecurityDisabledError] * 3

        filters = [kp_any_filter(), kp_any_filter()]
        deleted = admin.delete_acls(filters)
        assert [(f, matched, error) for f, matched, error in deleted] == [
            (f, [], SecurityDisabledError) for f in filters
        ]
        assert admin.list_topics() is not None
    finally:
        admin.close()


# --- With the authorizer on -------------------------------------------------------------
#
# No principal mechanism is configured, so every connection is User:ANONYMOUS (as on Kafka's
# PLAINTEXT listener); `allow.everyone.if.no.acl.found=true` lets it manage ACLs (no ACL names
# the cluster) and each test denies what it checks.

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"
KFAKE_LACKS_ENFORCEMENT = "kfake stores ACLs but enforces them only for SASL principals it authenticated"


def authorized_broker(broker_factory):
    return broker_factory(**{"authorizer.class.name": STANDARD_AUTHORIZER,
                             "allow.everyone.if.no.acl.found": "true"})


def anonymous_acl(resource_type, name, operation, permission, pattern=ResourcePatternType.LITERAL):
    return AclBinding(resource_type, name, pattern, ANONYMOUS, "*", operation, permission)


def create_all(admin, bindings):
    for binding, future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).items():
        assert future.result(timeout=TIMEOUT_S) is None, binding


def test_confluent_create_describe_delete_acls_with_the_authorizer_on(broker_factory):
    broker = authorized_broker(broker_factory)
    admin = confluent_admin(broker)
    bindings = [
        anonymous_acl(ResourceType.TOPIC, "acl-orders", AclOperation.WRITE, AclPermissionType.DENY),
        anonymous_acl(ResourceType.TOPIC, "acl-pay", AclOperation.READ, AclPermissionType.ALLOW,
                      ResourcePatternType.PREFIXED),
        anonymous_acl(ResourceType.GROUP, "acl-group", AclOperation.READ, AclPermissionType.ALLOW),
    ]
    create_all(admin, bindings)
    described = admin.describe_acls(any_acl_filter(), request_timeout=TIMEOUT_S).result()
    assert set(described) == set(bindings)

    # An exact filter (PREFIXED "acl-pay") selects that ACL alone, and deletes it.
    prefixed = AclBindingFilter(ResourceType.TOPIC, "acl-pay", ResourcePatternType.PREFIXED, None,
                                None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([prefixed], request_timeout=TIMEOUT_S)
    for _, future in deleted.items():
        assert future.result(timeout=TIMEOUT_S) == [bindings[1]]
    left = admin.describe_acls(any_acl_filter(), request_timeout=TIMEOUT_S).result()
    assert set(left) == {bindings[0], bindings[2]}


@pytest.mark.kfake_lacks("kfake's MATCH filter selects no PREFIXED or wildcard ACL covering the name")
def test_a_match_filter_selects_every_acl_that_covers_the_name(broker_factory):
    broker = authorized_broker(broker_factory)
    admin = confluent_admin(broker)
    covering = [
        anonymous_acl(ResourceType.TOPIC, "acl-payments", AclOperation.READ, AclPermissionType.ALLOW),
        anonymous_acl(ResourceType.TOPIC, "acl-pay", AclOperation.READ, AclPermissionType.ALLOW,
                      ResourcePatternType.PREFIXED),
        anonymous_acl(ResourceType.TOPIC, "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]
    other = anonymous_acl(ResourceType.TOPIC, "acl-orders", AclOperation.READ, AclPermissionType.ALLOW)
    create_all(admin, covering + [other])
    match = AclBindingFilter(ResourceType.TOPIC, "acl-payments", ResourcePatternType.MATCH, None,
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(match, request_timeout=TIMEOUT_S).result()) == set(covering)
    for _, future in admin.delete_acls([match], request_timeout=TIMEOUT_S).items():
        assert set(future.result(timeout=TIMEOUT_S)) == set(covering)
    assert admin.describe_acls(any_acl_filter(), request_timeout=TIMEOUT_S).result() == [other]


@pytest.mark.minikafka_only("restarts the broker on its data directory to read the stored ACLs")
def test_acls_survive_a_crash(broker_factory):
    broker = authorized_broker(broker_factory)
    binding = anonymous_acl(ResourceType.TOPIC, "acl-kept", AclOperation.WRITE, AclPermissionType.DENY)
    admin = confluent_admin(broker)
    create_all(admin, [binding])
    broker.crash_restart()
    admin = confluent_admin(broker)
    described = admin.describe_acls(any_acl_filter(), request_timeout=TIMEOUT_S).result()
    assert described == [binding]


def delivery_errors(broker, topic, count=3):
    from confluent_kafka import Producer
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000,
                         "retries": 0})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return errors


def create_topics(admin, names):
    from confluent_kafka.admin import NewTopic
    for name, future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).items():
        future.result(timeout=TIMEOUT_S)


@pytest.mark.kfake_lacks(KFAKE_LACKS_ENFORCEMENT)
def test_denied_produce_consume_and_group_get_kafkas_codes(broker_factory):
    from confluent_kafka import Consumer, TopicPartition
    broker = authorized_broker(broker_factory)
    admin = confluent_admin(broker)
    create_topics(admin, ["acl-open", "acl-secret"])
    create_all(admin, [
        # DENY over ALLOW: ANONYMOUS may describe acl-secret but neither write nor read it.
        anonymous_acl(ResourceType.TOPIC, "acl-secret", AclOperation.ALL, AclPermissionType.ALLOW),
        anonymous_acl(ResourceType.TOPIC, "acl-secret", AclOperation.WRITE, AclPermissionType.DENY),
        anonymous_acl(ResourceType.TOPIC, "acl-secret", AclOperation.READ, AclPermissionType.DENY),
        anonymous_acl(ResourceType.GROUP, "acl-closed", AclOperation.READ, AclPermissionType.DENY),
    ])

    assert delivery_errors(broker, "acl-open") == [None] * 3
    denied = delivery_errors(broker, "acl-secret")
    assert [e.code() for e in denied] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3

    def first_error(group, assign=None, subscribe=None):
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            if assign:
                consumer.assign([TopicPartition(assign, 0)])
            else:
                consumer.subscribe([subscribe])
            for _ in range(40):
                msg = consumer.poll(0.5)
                if msg is not None and msg.error():
                    return msg.error().code()
                if msg is not None:
                    return None
            return None
        finally:
            consumer.close()

    assert first_error("acl-ok", assign="acl-open") is None
    assert first_error("acl-ok", assign="acl-secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert first_error("acl-closed", subscribe="acl-open") == KafkaError.GROUP_AUTHORIZATION_FAILED
