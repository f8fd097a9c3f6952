"""The built-in schema registry with confluent-kafka's own registry client and serializers.

Contract:
- ``SchemaRegistryClient`` pointed at ``schema.registry.listeners`` (port 0 here; the bound
  address is read from the line the broker prints) registers, reads and looks up schemas with
  Confluent's bodies and status codes; an incompatible change is a ``SchemaRegistryError``
  with HTTP 409; soft then permanent deletes behave as Confluent's.
- ``AvroSerializer``/``AvroDeserializer`` and ``JSONSerializer``/``JSONDeserializer`` round
  trip records through a topic: the value on the wire starts with the magic byte 0 and the
  registered id, and deserializes to what was produced.
- ``ProtobufSerializer``/``ProtobufDeserializer`` round trip a message built at run time from a
  descriptor (no protoc): the client registers the schema as a base64 FileDescriptorProto.
- Ids are global (the same schema under two subjects has one id) and stable across a restart.
- A topic created with ``confluent.value.schema.validation=true`` takes what ``AvroSerializer``
  produces and refuses a raw value with INVALID_RECORD (I124).

kfake has no schema registry, hence minikafka only.
"""

import re
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.minikafka_only(
    "kfake has no schema registry (the Confluent REST API on schema.registry.listeners)"
)

USER_V1 = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "int"}]}"""
USER_V2 = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "int"},
             {"name": "email", "type": ["null", "string"], "default": null}]}"""
USER_BREAKING = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "int"},
             {"name": "country", "type": "string"}]}"""
PERSON_JSON = """{"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
  "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
  "required": ["name"]}"""


def registry_url(broker):
    found = re.findall(r"minikafka: schema registry on (http://\S+)", broker.output())
    assert found, broker.output()
    return found[-1]


def start(broker_factory):
    return broker_factory(schema_registry_listeners="http://127.0.0.1:0")


def round_trip(broker, topic, serializer, deserializer, values):
    """Produces ``values`` serialized, consumes them back deserialized; returns both forms."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"g-{uuid.uuid4()}",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([topic])
    raw, decoded = [], []
    deadline = time.monotonic() + 60
    try:
        while len(raw) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            raw.append(message.value())
            ctx = SerializationContext(topic, MessageField.VALUE)
            decoded.append(deserializer(message.value(), ctx))
    finally:
        consumer.close()
    return raw, decoded


def wire_id(value):
    magic, schema_id = struct.unpack(">bI", value[:5])
    assert magic == 0
    return schema_id


def test_avro_serializer_round_trip_and_evolution(broker_factory):
    broker = start(broker_factory)
    client = SchemaRegistryClient({"url": registry_url(broker)})
    topic = "users"
    users = [{"name": "ada", "favorite": 7}, {"name": "grace", "favorite": 42}]
    raw, decoded = round_trip(
        broker, topic, AvroSerializer(client, USER_V1), AvroDeserializer(client), users
    )
    assert decoded == users
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 1
    assert [wire_id(v) for v in raw] == [latest.schema_id] * 2
    assert client.get_subjects() == [f"{topic}-value"]

    # An allowed evolution: a new id and version 2; a fresh client reads both.
    v2 = client.register_schema(f"{topic}-value", Schema(USER_V2, "AVRO"))
    assert v2 != latest.schema_id
    assert client.get_versions(f"{topic}-value") == [1, 2]
    assert client.test_compatibility(f"{topic}-value", Schema(USER_BREAKING, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(USER_BREAKING, "AVRO"))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409
    fresh = SchemaRegistryClient({"url": registry_url(broker)})
    assert fresh.get_schema(latest.schema_id).schema_str == latest.schema.schema_str
    found = fresh.lookup_schema(f"{topic}-value", Schema(USER_V1, "AVRO"))
    assert (found.schema_id, found.version) == (latest.schema_id, 1)

    # Ids are global: the same schema under another subject has the same id.
    assert client.register_schema("copy-value", Schema(USER_V1, "AVRO")) == latest.schema_id

    # A restart replays _schemas: the ids and the data still deserialize.
    broker.restart()
    after = SchemaRegistryClient({"url": registry_url(broker)})
    assert after.get_latest_version(f"{topic}-value").schema_id == v2
    assert after.get_schema(latest.schema_id).schema_str == latest.schema.schema_str
    _, again = round_trip(
        broker, "users-after", AvroSerializer(after, USER_V1), AvroDeserializer(after), users
    )
    assert again == users


def test_deletes_soft_then_permanent(broker_factory):
    broker = start(broker_factory)
    client = SchemaRegistryClient({"url": registry_url(broker)})
    client.register_schema("gone-value", Schema(USER_V1, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.delete_subject("gone-value", permanent=True)
    assert (refused.value.http_status_code, refused.value.error_code) == (404, 40405)
    assert client.delete_subject("gone-value") == [1]
    assert client.get_subjects() == []
    assert client.delete_subject("gone-value", permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_versions("gone-value")
    assert (missing.value.http_status_code, missing.value.error_code) == (404, 40401)


def test_json_schema_serializer_round_trip(broker_factory):
    broker = start(broker_factory)
    client = SchemaRegistryClient({"url": registry_url(broker)})
    people = [{"name": "ada", "age": 36}, {"name": "alan"}]
    raw, decoded = round_trip(
        broker,
        "people",
        JSONSerializer(PERSON_JSON, client),
        JSONDeserializer(PERSON_JSON, schema_registry_client=client),
        people,
    )
    assert decoded == people
    registered = client.get_latest_version("people-value")
    assert registered.schema.schema_type == "JSON"
    assert {wire_id(v) for v in raw} == {registered.schema_id}


def test_protobuf_serializer_round_trip(broker_factory):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    # A message type built from a descriptor at run time (no protoc needed).
    file = descriptor_pb2.FileDescriptorProto(name="greeting.proto", package="interop", syntax="proto3")
    message = file.message_type.add(name="Greeting")
    message.field.add(name="text", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="count", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    greeting = message_factory.GetMessageClass(pool.FindMessageTypeByName("interop.Greeting"))

    broker = start(broker_factory)
    client = SchemaRegistryClient({"url": registry_url(broker)})
    values = [greeting(text="hello", count=1), greeting(text="again", count=2)]
    raw, decoded = round_trip(
        broker,
        "greetings",
        ProtobufSerializer(greeting, client, {"use.deprecated.format": False}),
        ProtobufDeserializer(greeting, {"use.deprecated.format": False}),
        values,
    )
    assert [(m.text, m.count) for m in decoded] == [("hello", 1), ("again", 2)]
    registered = client.get_latest_version("greetings-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert {wire_id(v) for v in raw} == {registered.schema_id}


def test_a_validating_topic_takes_serialized_values_and_refuses_raw_ones(broker_factory):
    broker = start(broker_factory)
    client = SchemaRegistryClient({"url": registry_url(broker)})
    topic = "validated"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"confluent.value.schema.validation": "true"})],
        operation_timeout=15,
    )
    futures[topic].result(30)
    users = [{"name": "ada", "favorite": 7}]
    raw, decoded = round_trip(
        broker, topic, AvroSerializer(client, USER_V1), AvroDeserializer(client), users
    )
    assert decoded == users
    assert wire_id(raw[0]) == client.get_latest_version(f"{topic}-value").schema_id

    # A raw value (no magic byte and id) is refused: the delivery report says INVALID_RECORD.
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    producer.produce(topic, value=b"not avro", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == KafkaError.INVALID_RECORD, reports[0]
    # An unknown id is refused too.
    reports.clear()
    producer.produce(topic, value=b"\x00\x00\x00\x27\x10avro", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0
    assert reports[0] is not None and reports[0].code() == KafkaError.INVALID_RECORD, reports
