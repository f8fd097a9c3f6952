"""SASL with real clients, configured as they are for Apache Kafka: confluent-kafka
(librdkafka) and kafka-python over SASL_PLAINTEXT with PLAIN (users from a Kafka JAAS line)
and SCRAM-SHA-512 (a user created with the admin clients' AlterUserScramCredentials, as
``kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=…]'`` does). Refusals: a
wrong password, an unknown mechanism, a request before authentication.

The broker has two listeners: PLAINTEXT on the harness's port (admin calls) and a named
listener SECURE mapped to SASL_PLAINTEXT by ``listener.security.protocol.map``.

TLS (rustls in the broker, librdkafka's OpenSSL and Python's ssl in the clients): a CA, a
broker certificate for 127.0.0.1/localhost and client certificates are made with the openssl
commands docs/SECURITY.md gives; confluent-kafka and kafka-python produce and consume over SSL,
confluent-kafka over SASL_SSL with SCRAM-SHA-512, and over mutual TLS, where the principal is
the certificate's subject (``User:CN=a,O=test``) and an ACL allows CN=a and not CN=b. Over
SASL_SSL with PLAIN and with SCRAM-SHA-512: kcat (the system's librdkafka, 2.0.2 on Debian 12,
whose SCRAM final nonce repeats the client nonce: accepted as Kafka ≥ 3.8.1 accepts it),
kafka-python, aiokafka and kafkajs, and confluent-kafka with PLAIN.

kfake: its runner exposes no listener, SASL or TLS option (kfake's ``EnableSASL``/``Superuser``
and its TLS listener are Go API only), so every test here is ``kfake_lacks`` and runs there as
a strict xfail.
"""

import asyncio
import json
import pathlib
import shutil
import socket
import struct
import subprocess
import time
import uuid

import pytest
from conftest import _free_port
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.admin import ScramCredentialInfo as CkScramInfo
from confluent_kafka.admin import ScramMechanism as CkScram
from confluent_kafka.admin import UserScramCredentialUpsertion as CkUpsertion
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError as KpError

NO_SASL_IN_KFAKE = pytest.mark.kfake_lacks(
    "kfake-runner has no listener or SASL options (EnableSASL is Go API only)"
)
pytestmark = NO_SASL_IN_KFAKE

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)
OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredValidatorRequiredScope="kafka";'
)
LIMIT_S = 30


@pytest.fixture
def secured(broker_factory):
    """A broker with a PLAINTEXT listener (admin) and a SASL_PLAINTEXT one named SECURE (the
    fixture turns `_` into `.` in keys, so the name has none); (broker, SECURE's address)."""
    sasl_port = _free_port()
    broker = broker_factory(**{
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SECURE://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        "listener.name.secure.plain.sasl.jaas.config": JAAS,
        # Only PLAIN and SCRAM-SHA-512 here, so SCRAM-SHA-256 is an unknown mechanism.
        "listener.name.secure.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    })
    return broker, f"127.0.0.1:{sasl_port}"


def _topic(broker, name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(timeout=LIMIT_S)


def _ck_config(bootstrap, mechanism, user, password):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _ck_round_trip(bootstrap, mechanism, user, password, topic):
    producer = Producer(_ck_config(bootstrap, mechanism, user, password))
    errors = []
    producer.produce(topic, b"hello " + mechanism.encode(), on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(LIMIT_S) == 0
    assert errors == [None]
    consumer = Consumer({
        **_ck_config(bootstrap, mechanism, user, password),
        "group.id": f"g-{uuid.uuid4()}",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([topic])
    deadline = time.monotonic() + LIMIT_S
    got = None
    while got is None and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got = msg.value()
    consumer.close()
    assert got == b"hello " + mechanism.encode()


def _kp_config(bootstrap, mechanism, user, password):
    return dict(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )


def _kp_refused(bootstrap, mechanism, user, password):
    """kafka-python's producer, refused by the broker: its constructor raises once its
    bootstrap gives up. kafka-python 3 retries the bootstrap for `bootstrap_timeout_ms` (30 s by
    default, whatever the cause); 5 s is enough for a refusal that comes at once."""
    bounded = {"bootstrap_timeout_ms": 5000} if "bootstrap_timeout_ms" in KafkaProducer.DEFAULT_CONFIG else {}
    with pytest.raises(KpError):
        KafkaProducer(**_kp_config(bootstrap, mechanism, user, password), max_block_ms=5000, **bounded)


def _kp_round_trip(bootstrap, mechanism, user, password, topic):
    producer = KafkaProducer(**_kp_config(bootstrap, mechanism, user, password))
    producer.send(topic, b"kp " + mechanism.encode()).get(timeout=LIMIT_S)
    producer.close()
    consumer = KafkaConsumer(
        **_kp_config(bootstrap, mechanism, user, password),
        auto_offset_reset="earliest",
        consumer_timeout_ms=LIMIT_S * 1000,
    )
    consumer.assign([TopicPartition(topic, 0)])
    # Read until the record arrives (the timeout only bounds a failure: iterating to it would
    # add 30 s to every passing run).
    values = []
    for m in consumer:
        values.append(m.value)
        if b"kp " + mechanism.encode() in values:
            break
    consumer.close()
    assert b"kp " + mechanism.encode() in values


def test_confluent_kafka_plain(secured):
    broker, sasl = secured
    _topic(broker, "plain-ck")
    _ck_round_trip(sasl, "PLAIN", "alice", "alice-secret", "plain-ck")


def test_kafka_python_plain(secured):
    broker, sasl = secured
    _topic(broker, "plain-kp")
    _kp_round_trip(sasl, "PLAIN", "bob", "bob-secret", "plain-kp")


def test_scram_sha_512_users_from_both_admin_clients(secured):
    broker, sasl = secured
    _topic(broker, "scram")
    # confluent-kafka creates carol; kafka-python creates dave and describes both.
    ck_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = CkUpsertion("carol", CkScramInfo(CkScram.SCRAM_SHA_512, 8192), b"carol-secret")
    for f in ck_admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=LIMIT_S)
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    kp_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    errors = kp_admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("dave", ScramMechanism.SCRAM_SHA_512, "dave-secret")]
    )
    assert errors == {"dave": None}
    described = kp_admin.describe_user_scram_credentials()
    assert set(described) == {"carol", "dave"}
    carol = described["carol"]["credential_infos"]
    assert [(i["mechanism"], i["iterations"]) for i in carol] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    kp_admin.close()

    _ck_round_trip(sasl, "SCRAM-SHA-512", "carol", "carol-secret", "scram")
    _kp_round_trip(sasl, "SCRAM-SHA-512", "dave", "dave-secret", "scram")
    # Stored salted and iterated, never the password.
    stored = (broker.data_dir / "scram-credentials").read_text()
    assert "carol-secret" not in stored and "SCRAM-SHA-512 salt=" in stored


def test_wrong_password_is_refused(secured):
    broker, sasl = secured
    failures = []
    producer = Producer({
        **_ck_config(sasl, "PLAIN", "alice", "not-her-password"),
        "error_cb": lambda e: failures.append(e),
    })
    deadline = time.monotonic() + LIMIT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in failures):
        assert time.monotonic() < deadline, f"no authentication error: {failures}"
        producer.poll(0.2)
    _kp_refused(sasl, "PLAIN", "bob", "nope")
    # The refusals were the broker's (not a timeout), logged without the password.
    log = broker.output()
    assert 'PLAIN authentication of "alice" failed' in log
    assert 'PLAIN authentication of "bob" failed' in log
    assert "not-her-password" not in log and "nope" not in log


def _raw_request(sock, api_key, version, body, correlation_id=1):
    header = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"t"
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def _read_frame(sock):
    def exact(n):
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return out

    size = exact(4)
    return None if size is None else exact(struct.unpack(">i", size)[0])


def test_unknown_mechanism_and_requests_before_authentication(secured):
    broker, sasl = secured
    host, port = sasl.split(":")
    # SaslHandshake v1 for GSSAPI: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, then
    # the broker closes the connection.
    with socket.create_connection((host, int(port)), timeout=10) as s:
        _raw_request(s, 17, 1, struct.pack(">h", 6) + b"GSSAPI")
        answer = _read_frame(s)
        assert answer is not None
        (error,) = struct.unpack(">h", answer[4:6])
        assert error == 33
        assert b"SCRAM-SHA-512" in answer and b"PLAIN" in answer and b"SHA-256" not in answer
        assert _read_frame(s) is None
    # Metadata v1 before authenticating: no answer, the connection is closed.
    with socket.create_connection((host, int(port)), timeout=10) as s:
        _raw_request(s, 3, 1, struct.pack(">i", -1))
        assert _read_frame(s) is None
    # kafka-python asked for a mechanism the listener does not enable.
    _kp_refused(sasl, "SCRAM-SHA-256", "x", "y")
    log = broker.output()
    assert 'unsupported SASL mechanism "SCRAM-SHA-256"' in log
    assert "request of API key 3 before authentication" in log


# ---------------------------------------------------------------------------------------------
# TLS


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(pki, name, subject, sans=None):
    """`name`.key/.crt signed by the CA in `pki`, and `name`.pem (key then chain), as
    docs/SECURITY.md makes them."""
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=pki)
    ext = pki / f"{name}.ext"
    lines = ["extendedKeyUsage=serverAuth,clientAuth"]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    ext.write_text("\n".join(lines) + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", ext.name, cwd=pki)
    (pki / f"{name}.pem").write_text((pki / f"{name}.key").read_text() + (pki / f"{name}.crt").read_text())


@pytest.fixture
def pki(tmp_path):
    """A CA, the broker's certificate (127.0.0.1, localhost) and clients CN=a and CN=b."""
    d = tmp_path / "pki"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=minikafka test CA",
             cwd=d)
    _issue(d, "broker", "/CN=localhost", ["DNS:localhost", "IP:127.0.0.1"])
    _issue(d, "a", "/O=test/CN=a")
    _issue(d, "b", "/O=test/CN=b")
    return d


def _tls_broker(broker_factory, pki, **extra):
    """PLAINTEXT (admin), TLS (SSL), STLS (SASL_SSL: PLAIN, SCRAM-SHA-512 and OAUTHBEARER with
    Kafka's unsecured validator requiring scope ``kafka``) and MTLS (SSL with
    ssl.client.auth=required) listeners, the authorizer on with User:ANONYMOUS, erin (SCRAM)
    and alice (PLAIN, OAUTHBEARER) super users; (broker, {listener: address})."""
    ports = {name: _free_port() for name in ("TLS", "STLS", "MTLS")}
    broker = broker_factory(**{
        "listeners": "PLAINTEXT://127.0.0.1:{port}," + ",".join(
            f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,TLS:SSL,STLS:SASL_SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki / "broker.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.crt"),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.stls.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.stls.plain.sasl.jaas.config": JAAS,
        "listener.name.stls.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:erin;User:alice",
        **extra,
    })
    return broker, {n: f"127.0.0.1:{p}" for n, p in ports.items()}


@pytest.fixture
def tls(broker_factory, pki):
    """The listeners of `_tls_broker`."""
    return _tls_broker(broker_factory, pki)


def _ck_tls_round_trip(config, topic, value):
    producer = Producer(config)
    errors = []
    producer.produce(topic, value, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(LIMIT_S) == 0
    assert errors == [None], errors
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + LIMIT_S
    got = []
    while value not in got and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert value in got


def test_confluent_kafka_and_kafka_python_over_ssl(tls, pki):
    broker, addrs = tls
    _topic(broker, "over-ssl")
    _ck_tls_round_trip({
        "bootstrap.servers": addrs["TLS"],
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki / "ca.crt"),
    }, "over-ssl", b"ck over ssl")
    kp = dict(bootstrap_servers=addrs["TLS"], security_protocol="SSL",
              ssl_cafile=str(pki / "ca.crt"))
    producer = KafkaProducer(**kp)
    producer.send("over-ssl", b"kp over ssl").get(timeout=LIMIT_S)
    producer.close()
    consumer = KafkaConsumer(**kp, auto_offset_reset="earliest", consumer_timeout_ms=LIMIT_S * 1000)
    consumer.assign([TopicPartition("over-ssl", 0)])
    values = []
    for m in consumer:
        values.append(m.value)
        if b"kp over ssl" in values:
            break
    consumer.close()
    assert b"ck over ssl" in values and b"kp over ssl" in values


def test_confluent_kafka_sasl_ssl_with_scram(tls, pki):
    broker, addrs = tls
    _topic(broker, "over-sasl-ssl")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = CkUpsertion("erin", CkScramInfo(CkScram.SCRAM_SHA_512, 4096), b"erin-secret")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=LIMIT_S)
    config = {
        "bootstrap.servers": addrs["STLS"],
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki / "ca.crt"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "erin",
        "sasl.password": "erin-secret",
    }
    _ck_tls_round_trip(config, "over-sasl-ssl", b"scram over tls")
    # A wrong password inside TLS: SASL's refusal, not a TLS one.
    failures = []
    producer = Producer({**config, "sasl.password": "wrong", "error_cb": failures.append})
    deadline = time.monotonic() + LIMIT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in failures):
        assert time.monotonic() < deadline, f"no authentication error: {failures}"
        producer.poll(0.2)


def test_kcat_kafka_python_and_confluent_kafka_over_sasl_ssl_with_plain_and_scram(tls, pki):
    """The rest of issue 22 item 7's matrix over SASL_SSL: kcat (the system librdkafka) and
    kafka-python with PLAIN and with SCRAM-SHA-512, confluent-kafka with PLAIN (its SCRAM is
    above; aiokafka and kafkajs are below). Each client writes a value of its own to partition
    0 and reads it back over the same listener."""
    broker, addrs = tls
    topic = "sasl-ssl-matrix"
    _topic(broker, topic)
    _scram_user(broker, "erin", "erin-secret")
    ca = str(pki / "ca.crt")
    _ck_tls_round_trip({
        "bootstrap.servers": addrs["STLS"],
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": ca,
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }, topic, b"ck PLAIN over sasl_ssl")
    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"),
                                      ("SCRAM-SHA-512", "erin", "erin-secret")):
        kcat = ["kcat", "-b", addrs["STLS"], "-X", "security.protocol=SASL_SSL",
                "-X", f"ssl.ca.location={ca}", "-X", f"sasl.mechanisms={mechanism}",
                "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
        value = f"kcat {mechanism} over sasl_ssl"
        wrote = subprocess.run([*kcat, "-P", "-t", topic, "-p", "0"],
                               input=(value + "\n").encode(), capture_output=True,
                               timeout=LIMIT_S)
        assert wrote.returncode == 0, wrote
        read = subprocess.run([*kcat, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
                               "-f", "%s\n"], check=True, capture_output=True, timeout=LIMIT_S)
        assert value in read.stdout.decode().splitlines(), read
        kp = dict(bootstrap_servers=addrs["STLS"], security_protocol="SASL_SSL", ssl_cafile=ca,
                  sasl_mechanism=mechanism, sasl_plain_username=user,
                  sasl_plain_password=password)
        value = f"kp {mechanism} over sasl_ssl".encode()
        producer = KafkaProducer(**kp)
        producer.send(topic, value, partition=0).get(timeout=LIMIT_S)
        producer.close()
        consumer = KafkaConsumer(**kp, auto_offset_reset="earliest",
                                 consumer_timeout_ms=LIMIT_S * 1000)
        consumer.assign([TopicPartition(topic, 0)])
        seen = []
        for m in consumer:
            seen.append(m.value)
            if value in seen:
                break
        consumer.close()
        assert value in seen, (mechanism, seen)
    # Every write above is in the log, in the order it was made.
    read = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o",
                           "beginning", "-e", "-f", "%s\n"], check=True, capture_output=True,
                          timeout=LIMIT_S)
    assert read.stdout.decode().splitlines() == [
        "ck PLAIN over sasl_ssl", "kcat PLAIN over sasl_ssl", "kp PLAIN over sasl_ssl",
        "kcat SCRAM-SHA-512 over sasl_ssl", "kp SCRAM-SHA-512 over sasl_ssl"], read


def test_mutual_tls_principal_is_the_subject_and_acls_apply(tls, pki):
    broker, addrs = tls
    _topic(broker, "mtls")
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    acls = [AclBinding(ResourceType.TOPIC, "mtls", ResourcePatternType.LITERAL,
                       "User:CN=a,O=test", "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for f in admin.create_acls(acls).values():
        f.result(timeout=LIMIT_S)

    def client(name):
        return {
            "bootstrap.servers": addrs["MTLS"],
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki / "ca.crt"),
            "ssl.certificate.location": str(pki / f"{name}.crt"),
            "ssl.key.location": str(pki / f"{name}.key"),
        }

    def produce(config):
        producer = Producer({**config, "message.timeout.ms": 10000})
        errors = []
        producer.produce("mtls", b"x", on_delivery=lambda e, m: errors.append(e))
        producer.flush(LIMIT_S)
        return errors

    assert produce(client("a")) == [None]
    [denied] = produce(client("b"))
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied
    # No certificate where one is required: the handshake fails, nothing is produced.
    [refused] = produce({k: v for k, v in client("a").items()
                         if k not in ("ssl.certificate.location", "ssl.key.location")})
    assert refused is not None


# ---------------------------------------------------------------------------------------------
# aiokafka and kafkajs over SSL and SASL_SSL (PLAIN and SCRAM-SHA-512)

HERE = pathlib.Path(__file__).resolve().parent
KAFKAJS_LIMIT_S = 100


def _scram_user(broker, name, password):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = CkUpsertion(name, CkScramInfo(CkScram.SCRAM_SHA_512, 4096), password.encode())
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=LIMIT_S)


def _aiokafka_round_trip(bootstrap, topic, value, **security):
    """Produces `value` with aiokafka and reads `topic` partition 0 from the start until it
    arrives; returns what was read."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **security)
        await asyncio.wait_for(producer.start(), LIMIT_S)
        try:
            await asyncio.wait_for(producer.send_and_wait(topic, value, partition=0), LIMIT_S)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, **security)
        await asyncio.wait_for(consumer.start(), LIMIT_S)
        seen = []
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            deadline = time.monotonic() + LIMIT_S
            while value not in seen and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                seen.extend(m.value for msgs in batches.values() for m in msgs)
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


def _aio_ssl(pki):
    from aiokafka.helpers import create_ssl_context

    return create_ssl_context(cafile=str(pki / "ca.crt"))


def test_aiokafka_over_ssl_and_sasl_ssl_plain_and_scram(tls, pki):
    broker, addrs = tls
    _topic(broker, "aio-secure")
    _scram_user(broker, "erin", "erin-secret")
    assert b"aio ssl" in _aiokafka_round_trip(
        addrs["TLS"], "aio-secure", b"aio ssl", security_protocol="SSL", ssl_context=_aio_ssl(pki))
    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"),
                                      ("SCRAM-SHA-512", "erin", "erin-secret")):
        value = f"aio {mechanism}".encode()
        seen = _aiokafka_round_trip(
            addrs["STLS"], "aio-secure", value, security_protocol="SASL_SSL",
            ssl_context=_aio_ssl(pki), sasl_mechanism=mechanism,
            sasl_plain_username=user, sasl_plain_password=password)
        assert value in seen, (mechanism, seen)
    # A wrong password: aiokafka's start fails with the broker's refusal.
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioError

    async def wrong():
        producer = AIOKafkaProducer(
            bootstrap_servers=addrs["STLS"], security_protocol="SASL_SSL",
            ssl_context=_aio_ssl(pki), sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="erin", sasl_plain_password="wrong", request_timeout_ms=10000)
        try:
            await asyncio.wait_for(producer.start(), LIMIT_S)
        finally:
            await producer.stop()

    with pytest.raises(AioError):
        asyncio.run(wrong())
    assert 'SCRAM-SHA-512 authentication of "erin" failed' in broker.output()


@pytest.fixture
def node():
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed")
    if not (HERE / "kafkajs" / "node_modules" / "kafkajs").is_dir():
        pytest.fail("kafkajs is not installed: `npm ci --prefix tests/interop/kafkajs` (run.sh does it)")
    return path


def _kafkajs(node, bootstrap, topic, value, security):
    """Runs kafkajs/security.js; (exit status, its report)."""
    done = subprocess.run(
        [node, str(HERE / "kafkajs" / "security.js"), bootstrap, topic, value, json.dumps(security)],
        capture_output=True, text=True, timeout=KAFKAJS_LIMIT_S, check=False)
    lines = done.stdout.strip().splitlines()
    assert lines, f"kafkajs printed nothing:\n{done.stderr}"
    return done.returncode, json.loads(lines[-1])


def test_kafkajs_over_ssl_and_sasl_ssl_plain_and_scram(tls, pki, node):
    broker, addrs = tls
    _topic(broker, "kjs-secure")
    _scram_user(broker, "erin", "erin-secret")
    ca = str(pki / "ca.crt")
    runs = [
        (addrs["TLS"], "kjs ssl", {"ca": ca}),
        (addrs["STLS"], "kjs plain",
         {"ca": ca, "sasl": {"mechanism": "plain", "username": "alice", "password": "alice-secret"}}),
        (addrs["STLS"], "kjs scram",
         {"ca": ca, "sasl": {"mechanism": "scram-sha-512", "username": "erin",
                             "password": "erin-secret"}}),
    ]
    for bootstrap, value, security in runs:
        rc, report = _kafkajs(node, bootstrap, "kjs-secure", value, security)
        assert rc == 0 and report["produced"] and value in report["seen"], (value, report)
    rc, report = _kafkajs(node, addrs["STLS"], "kjs-secure", "never", {
        "ca": ca, "sasl": {"mechanism": "scram-sha-512", "username": "erin", "password": "wrong"}})
    assert rc == 1 and not report["produced"], report
    assert "SASL" in report["error"] or "uthentication" in report["error"], report
    assert 'SCRAM-SHA-512 authentication of "erin" failed' in broker.output()


# ---------------------------------------------------------------------------------------------
# OAUTHBEARER (unsecured JWTs, Kafka's default validator) and KIP-368 re-authentication


def _ck_oauth(addrs, pki, principal, scope="kafka", life_s=3600):
    """librdkafka's own unsecured JWT (``enable.sasl.oauthbearer.unsecure.jwt``), as a Kafka
    user configures it for development."""
    return {
        "bootstrap.servers": addrs["STLS"],
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki / "ca.crt"),
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal} scope={scope} lifeSeconds={life_s}",
    }


def test_confluent_kafka_oauthbearer_unsecured_jwt(tls, pki):
    broker, addrs = tls
    _topic(broker, "oauth")
    _ck_tls_round_trip(_ck_oauth(addrs, pki, "alice"), "oauth", b"oauthbearer over tls")
    assert 'user="alice"' in broker.output() or "user=alice" in broker.output()
    # A token without the scope the listener requires: Kafka's JSON error reaches the client.
    failures = []
    producer = Producer({**_ck_oauth(addrs, pki, "alice", scope="other"),
                         "error_cb": failures.append})
    deadline = time.monotonic() + LIMIT_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in failures):
        assert time.monotonic() < deadline, f"no authentication error: {failures}"
        producer.poll(0.2)
    refusal = next(e for e in failures if e.code() == KafkaError._AUTHENTICATION)
    assert "insufficient_scope" in refusal.str(), refusal.str()
    assert "OAUTHBEARER token refused" in broker.output()


def test_kafkajs_and_aiokafka_oauthbearer(tls, pki, node):
    from aiokafka.abc import AbstractTokenProvider

    broker, addrs = tls
    _topic(broker, "oauth-js")
    now = time.time()

    def token(sub):
        import base64

        def part(obj):
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

        return f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': now + 600, 'scope': 'kafka'})}."

    rc, report = _kafkajs(node, addrs["STLS"], "oauth-js", "kjs oauth", {
        "ca": str(pki / "ca.crt"), "sasl": {"mechanism": "oauthbearer", "token": token("alice")}})
    assert rc == 0 and "kjs oauth" in report["seen"], report

    class Provider(AbstractTokenProvider):
        async def token(self):
            return token("alice")

    seen = _aiokafka_round_trip(
        addrs["STLS"], "oauth-js", b"aio oauth", security_protocol="SASL_SSL",
        ssl_context=_aio_ssl(pki), sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider())
    assert b"aio oauth" in seen, seen


def test_confluent_kafka_reauthenticates_before_its_session_expires(broker_factory, pki):
    """KIP-368: with connections.max.reauth.ms=2000 librdkafka re-authenticates on its
    connections (SCRAM-SHA-512 and OAUTHBEARER) and keeps producing; none is closed for an
    expired session."""
    broker, addrs = _tls_broker(broker_factory, pki, **{"connections.max.reauth.ms": "2000"})
    _topic(broker, "reauth")
    _scram_user(broker, "erin", "erin-secret")
    configs = {
        "scram": {
            "bootstrap.servers": addrs["STLS"], "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki / "ca.crt"), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "erin", "sasl.password": "erin-secret",
        },
        "oauth": _ck_oauth(addrs, pki, "alice"),
    }
    for name, config in configs.items():
        producer = Producer({**config, "linger.ms": 0})
        errors = []
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < 7:
            producer.produce("reauth", f"{name} {n}".encode(), on_delivery=lambda e, m: errors.append(e))
            n += 1
            assert producer.flush(LIMIT_S) == 0
            time.sleep(0.25)
        assert errors == [None] * n, errors
    log = broker.output()
    assert log.count("re-authenticated") >= 4, log
    assert 'user="erin"' in log and "session expired" not in log, log


# OAUTHBEARER with signed tokens (KIP-768's broker side, I166–I168): the broker verifies each
# token against a JWKS file; librdkafka (confluent-kafka's oauth_cb) and kafka-python (a
# token provider) sign theirs with a key made here. kfake cannot validate a JWKS.


def _jwks_keys(tmp_path):
    """A P-256 key, its JWKS file (kid ``k1``), and a signer of claims as an ES256 JWT."""
    import base64

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    key = ec.generate_private_key(ec.SECP256R1())
    pub = key.public_key().public_numbers()
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{
        "kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
        "x": b64(pub.x.to_bytes(32, "big")), "y": b64(pub.y.to_bytes(32, "big"))}]}))

    def sign(claims, signer=key):
        header = b64(json.dumps({"alg": "ES256", "kid": "k1", "typ": "JWT"}).encode())
        body = b64(json.dumps(claims).encode())
        der = signer.sign(f"{header}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
        r, s = utils.decode_dss_signature(der)
        return f"{header}.{body}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    return jwks, sign, lambda: ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def jwks_server():
    """Serves a JWKS file over HTTP on 127.0.0.1 (an identity provider's jwks_uri, I178)."""
    import http.server
    import threading

    served = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = served["path"].read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def url_for(path):
        served["path"] = path
        return f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"

    yield url_for
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("source", ["file", "http"])
def test_real_clients_authenticate_with_signed_tokens_against_a_jwks(
        broker_factory, tmp_path, jwks_server, source):
    jwks, sign, other_key = _jwks_keys(tmp_path)
    url = f"file://{jwks}" if source == "file" else jwks_server(jwks)
    port = _free_port()
    broker = broker_factory(**{
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},OAUTH://127.0.0.1:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT",
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.issuer": "https://idp.test",
        "listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.audience": "kafka",
    })
    _topic(broker, "signed")
    addr = f"127.0.0.1:{port}"

    def claims(sub, **extra):
        now = int(time.time())
        return {"sub": sub, "iss": "https://idp.test", "aud": "kafka", "iat": now,
                "exp": now + 600, **extra}

    def ck(token_fn, **extra):
        return {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": token_fn, **extra}

    # librdkafka: oauth_cb returns (token, expiry in epoch seconds, principal).
    good = ck(lambda _config: (sign(claims("alice")), time.time() + 600, "alice"))
    producer = Producer(good)
    delivered = []
    producer.produce("signed", b"ck signed", on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(LIMIT_S) == 0
    assert delivered == [None], delivered
    assert 'user="alice"' in broker.output() or "user=alice" in broker.output()

    # kafka-python: a token provider.
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self):
            return sign(claims("bob"))

    kp = KafkaProducer(bootstrap_servers=addr, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider())
    kp.send("signed", b"kp signed").get(timeout=LIMIT_S)
    kp.close()
    consumer = Consumer({**good, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest"})
    consumer.subscribe(["signed"])
    seen, deadline = [], time.monotonic() + LIMIT_S
    while len(seen) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    consumer.close()
    assert sorted(seen) == [b"ck signed", b"kp signed"], seen

    # Refused as Kafka refuses them: another key, another issuer, an expired token.
    for bad in (sign(claims("mallory"), signer=other_key()),
                sign(claims("mallory", iss="https://elsewhere")),
                sign(claims("mallory", exp=int(time.time()) - 120))):
        failures = []
        refused = Producer(ck(lambda _c, t=bad: (t, time.time() + 600, "mallory"),
                              error_cb=failures.append))
        deadline = time.monotonic() + LIMIT_S
        while not any(e.code() == KafkaError._AUTHENTICATION for e in failures):
            assert time.monotonic() < deadline, f"no authentication error: {failures}"
            refused.poll(0.2)
        refusal = next(e for e in failures if e.code() == KafkaError._AUTHENTICATION)
        assert "invalid_token" in refusal.str(), refusal.str()
    assert "OAUTHBEARER token refused: Invalid signed JWT" in broker.output()
