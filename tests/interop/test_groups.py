"""Consumer groups as real clients use them: librdkafka (confluent-kafka) with the classic and
the consumer (KIP-848) protocols, kafka-python, aiokafka and `kcat -G`; commits and resume,
durability of committed offsets and group deletions across kill -9 and a clean restart,
fencing of a member that was rebalanced away, and the admin view of a group.

Each scenario reads a group back in a way that can only pass if the broker kept what was
committed: a resumed consumer's first records must be exactly the uncommitted ones (an old
record among them fails the test), and a new group must read everything.
"""

import asyncio
import json
import os
import pathlib
import select
import signal
import subprocess
import sys

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from group_clients import (
    GROUP_BROKER,
    PROTOCOLS,
    WAIT_S,
    admin,
    committed_offsets,
    create_topic,
    end_offsets,
    group_consumer,
    poll_values,
    produce,
    protocol_id,
    wait_assignment,
)

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def group_broker(broker_factory):
    """A broker set up for group tests (no initial rebalance delay)."""
    return broker_factory(**GROUP_BROKER)


def values(prefix, count, start=0):
    return [f"{prefix}-{i}".encode() for i in range(start, start + count)]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=protocol_id)
@pytest.mark.parametrize("commit_mode", ["sync", "async"])
def test_confluent_subscribe_commit_resume(group_broker, protocol, commit_mode):
    """librdkafka subscribe() in a group: reads all 60 records of a 3-partition topic, commits
    (synchronously, or asynchronously confirmed by the commit callback), closes; the committed
    offsets are the high watermarks; after 30 more records a restarted member of the group
    reads exactly those 30, and a second group reads all 90."""
    topic, group = "cf-resume", "cf-resume-group"
    create_topic(group_broker, topic, 3)
    first = values("first", 60)
    produce(group_broker, topic, first)

    commits = []
    consumer = group_consumer(
        group_broker, group, protocol, on_commit=lambda err, parts: commits.append((err, parts))
    )
    consumer.subscribe([topic])
    got = poll_values(consumer, len(first))
    assert sorted(v for _, _, v in got) == sorted(first)
    if commit_mode == "sync":
        result = consumer.commit(asynchronous=False)
        assert all(tp.error is None for tp in result), result
    else:
        assert consumer.commit(asynchronous=True) is None
        deadline_polls = int(WAIT_S / 0.2)
        while not commits and deadline_polls > 0:
            assert consumer.poll(0.2) is None, "no record expected after all were read"
            deadline_polls -= 1
        assert commits, "the asynchronous commit never completed"
        err, parts = commits[0]
        assert err is None, f"asynchronous commit failed: {err}"
        assert all(tp.error is None for tp in parts), parts
    positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
    consumer.close()

    ends = end_offsets(group_broker, topic, 3)
    assert positions == ends
    assert committed_offsets(group_broker, group, topic, 3) == ends

    second = values("second", 30)
    produce(group_broker, topic, second)
    resumed = group_consumer(group_broker, group, protocol)
    resumed.subscribe([topic])
    try:
        again = poll_values(resumed, len(second))
        assert sorted(v for _, _, v in again) == sorted(second), "resumed before the committed offset"
    finally:
        resumed.close()

    fresh = group_consumer(group_broker, group + "-other", protocol)
    fresh.subscribe([topic])
    try:
        everything = poll_values(fresh, len(first) + len(second))
        assert sorted(v for _, _, v in everything) == sorted(first + second)
    finally:
        fresh.close()


def test_kafka_python_group_commit_resume(group_broker):
    """kafka-python KafkaConsumer with group_id (subscribe, explicit commit()): reads 40
    records, commits, closes; after 20 more a new member of the group reads exactly those 20;
    another group reads all 60."""
    from kafka import KafkaConsumer

    topic, group = "kp-group", "kp-group-g"
    create_topic(group_broker, topic, 2)
    first, second = values("kp", 40), values("kp", 20, start=40)
    produce(group_broker, topic, first)

    def read(group_id, count, commit):
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=group_broker.bootstrap,
            group_id=group_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        try:
            got = []
            for _ in range(int(WAIT_S / 0.5)):
                for batch in consumer.poll(timeout_ms=500).values():
                    got.extend(r.value for r in batch)
                if len(got) >= count:
                    break
            assert len(got) >= count, f"kafka-python read {len(got)} of {count}"
            if commit:
                consumer.commit()
            return got
        finally:
            consumer.close(autocommit=False)

    assert sorted(read(group, len(first), commit=True)) == sorted(first)
    assert committed_offsets(group_broker, group, topic, 2) == end_offsets(group_broker, topic, 2)
    produce(group_broker, topic, second)
    assert sorted(read(group, len(second), commit=True)) == sorted(second)
    assert sorted(read(group + "-other", len(first) + len(second), commit=False)) == sorted(first + second)


def test_aiokafka_group_commit_resume(group_broker):
    """aiokafka AIOKafkaConsumer with group_id: reads 40 records, commits, stops; after 20
    more a new member of the group reads exactly those 20; another group reads all 60."""
    from aiokafka import AIOKafkaConsumer

    topic, group = "aio-group", "aio-group-g"
    create_topic(group_broker, topic, 2)
    first, second = values("aio", 40), values("aio", 20, start=40)
    produce(group_broker, topic, first)

    async def read(group_id, count, commit):
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=group_broker.bootstrap,
            group_id=group_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        await asyncio.wait_for(consumer.start(), WAIT_S)
        try:
            got = []

            async def collect():
                while len(got) < count:
                    batches = await consumer.getmany(timeout_ms=500)
                    for batch in batches.values():
                        got.extend(r.value for r in batch)

            try:
                await asyncio.wait_for(collect(), WAIT_S)
            except asyncio.TimeoutError:
                pytest.fail(f"aiokafka read {len(got)} of {count} in {WAIT_S} s")
            if commit:
                await asyncio.wait_for(consumer.commit(), WAIT_S)
            return got
        finally:
            await asyncio.wait_for(consumer.stop(), WAIT_S)

    assert sorted(asyncio.run(read(group, len(first), True))) == sorted(first)
    assert committed_offsets(group_broker, group, topic, 2) == end_offsets(group_broker, topic, 2)
    produce(group_broker, topic, second)
    assert sorted(asyncio.run(read(group, len(second), True))) == sorted(second)
    assert sorted(asyncio.run(read(group + "-other", 60, False))) == sorted(first + second)


def kcat_group(broker, group, topic):
    """`kcat -G group topic` until the end of every assigned partition (`-e`), reading from
    the beginning when the group has no committed offset; returns the values it printed."""
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
         "-e", "-q", "-f", "%s\n", topic],
        capture_output=True,
        timeout=WAIT_S,
    )
    assert result.returncode == 0, f"kcat -G failed: {result.stderr.decode(errors='replace')}"
    return result.stdout.decode().splitlines()


def test_kcat_balanced_consumer_resumes_after_commit(group_broker):
    """`kcat -G` (the system librdkafka; auto-commit on close) reads a 2-partition topic to
    its end; a second run in the same group reads nothing; after 3 more records a third run
    reads exactly those; a run in another group reads all."""
    topic = "kc-group"
    create_topic(group_broker, topic, 2)
    first = [f"kc-{i}" for i in range(25)]
    produce(group_broker, topic, [v.encode() for v in first])
    assert sorted(kcat_group(group_broker, "kc-g", topic)) == sorted(first)
    assert kcat_group(group_broker, "kc-g", topic) == []
    more = ["kc-more-0", "kc-more-1", "kc-more-2"]
    produce(group_broker, topic, [v.encode() for v in more])
    assert sorted(kcat_group(group_broker, "kc-g", topic)) == sorted(more)
    assert sorted(kcat_group(group_broker, "kc-g2", topic)) == sorted(first + more)


class DurableGroups:
    """A broker with flush.policy=fsync, a 2-partition topic of 40 records, and the group
    operations the durability tests check across a restart."""

    topic = "durable-groups"

    def __init__(self, broker_factory):
        self.broker = broker_factory(flush_policy="fsync", **GROUP_BROKER)
        create_topic(self.broker, self.topic, 2)
        self.records = values("d", 40)
        self.placed = produce(self.broker, self.topic, self.records)

    def restart(self, how):
        if how == "kill-9":
            self.broker.crash_restart()
        else:
            self.broker.restart()
        # A fresh AdminClient, as a new process would have: librdkafka's admin client carried
        # across a broker restart was seen to wait out an OffsetFetch for a deleted group.
        self.broker.clients.clear()

    def commit(self, group, offsets, metadata=""):
        """Joins ``group`` and commits ``{partition: offset}`` with ``metadata``."""
        consumer = group_consumer(self.broker, group)
        consumer.subscribe([self.topic])
        try:
            wait_assignment([consumer], {(self.topic, 0), (self.topic, 1)})
            tps = [TopicPartition(self.topic, p, o, metadata=metadata) for p, o in offsets.items()]
            result = consumer.commit(offsets=tps, asynchronous=False)
            assert all(tp.error is None for tp in result), result
        finally:
            consumer.close()

    def delete(self, group):
        futures = admin(self.broker).delete_consumer_groups([group], request_timeout=WAIT_S)
        futures[group].result(timeout=WAIT_S)

    def listed(self):
        return {g.group_id for g in admin(self.broker).list_consumer_groups().result(timeout=WAIT_S).valid}

    def fetched(self, group):
        """``{partition: (offset, metadata)}`` from OffsetFetch; an unknown group has no
        offsets, which Kafka answers with offset -1 per partition and kfake with the group
        error GROUP_ID_NOT_FOUND: both read as ``OFFSET_INVALID`` here."""
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(self.topic, p) for p in range(2)])
        try:
            result = admin(self.broker).list_consumer_group_offsets([request])[group].result(timeout=WAIT_S)
        except KafkaException as e:
            assert e.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND, e
            return {p: (OFFSET_INVALID, "") for p in range(2)}
        for tp in result.topic_partitions:
            assert tp.error is None, f"offset fetch error for {tp}: {tp.error}"
        return {tp.partition: (tp.offset, tp.metadata or "") for tp in result.topic_partitions}

    def first_reads(self, group, count):
        """The first ``count`` values a new member of ``group`` reads."""
        consumer = group_consumer(self.broker, group)
        consumer.subscribe([self.topic])
        try:
            return sorted(v for _, _, v in poll_values(consumer, count))
        finally:
            consumer.close()

    def after(self, offsets):
        """The values at or after ``{partition: offset}``."""
        return sorted(v for v, (p, o) in self.placed.items() if o >= offsets[p])


RESTARTS = ["kill-9", "clean"]
KFAKE_DELETE_NOT_LOGGED = (
    "kfake's DeleteGroups logs no tombstone to its groups.log (only a clean shutdown rewrites "
    "it from live state), so the deleted group's commits replay after kill -9"
)


@pytest.mark.parametrize("how", RESTARTS)
def test_committed_offsets_survive_broker_restart(broker_factory, how):
    """With flush.policy=fsync, offsets committed with metadata survive a restart (kill -9 or
    clean): OffsetFetch returns them and a new member resumes exactly there. A second round of
    commits survives a second restart: the latest commit wins."""
    d = DurableGroups(broker_factory)
    for offsets, metadata in (({0: 3, 1: 5}, "round-1"), ({0: 7, 1: 9}, "round-2")):
        d.commit("kept", offsets, metadata)
        d.restart(how)
        assert d.fetched("kept") == {p: (o, metadata) for p, o in offsets.items()}
        assert "kept" in d.listed()
        want = d.after(offsets)
        assert d.first_reads("kept", len(want)) == want


@pytest.mark.parametrize(
    "how", [pytest.param("kill-9", marks=pytest.mark.kfake_lacks(KFAKE_DELETE_NOT_LOGGED)), "clean"]
)
def test_group_deletion_survives_broker_restart(broker_factory, how):
    """With flush.policy=fsync, a group deleted with DeleteGroups stays deleted after a
    restart (kill -9 or clean): not listed, no offsets, and a new member reads from the
    beginning; another group's offsets are untouched."""
    d = DurableGroups(broker_factory)
    d.commit("kept", {0: 2, 1: 4})
    d.commit("gone", {0: 6, 1: 8})
    d.delete("gone")
    assert "gone" not in d.listed()
    d.restart(how)
    assert "gone" not in d.listed()
    assert d.fetched("gone") == {0: (OFFSET_INVALID, ""), 1: (OFFSET_INVALID, "")}
    assert d.fetched("kept") == {0: (2, ""), 1: (4, "")}
    assert d.first_reads("gone", len(d.records)) == sorted(d.records)


def read_line(proc, limit_s=WAIT_S):
    """One line of a child's stdout, bounded."""
    ready, _, _ = select.select([proc.stdout], [], [], limit_s)
    assert ready, f"child said nothing in {limit_s} s"
    return proc.stdout.readline().decode().strip()


# What a member rebalanced away may be told when it commits: the classic protocol's and the
# consumer protocol's (member epochs) ways to say "not a member of this generation".
FENCED = {
    "classic": {"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS"},
    "consumer": {"STALE_MEMBER_EPOCH", "FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"},
}


@pytest.mark.parametrize("protocol", [("classic", "range"), ("consumer", "uniform")], ids=protocol_id)
def test_member_rebalanced_away_cannot_commit(broker_factory, protocol):
    """A member is frozen (SIGSTOP) past its session timeout (6 s; for the consumer protocol
    the broker's group.consumer.session.timeout.ms) while a second member joins; the group
    rebalances without it and the second member commits. Thawed, the first member's commit of
    newer offsets fails with a fencing error (FENCED), and the committed offsets stay the
    second member's."""
    # Kafka's settings for a 6 s consumer-protocol session (its default minimum is 45 s).
    session = {"group_consumer_session_timeout_ms": "6000", "group_consumer_min_session_timeout_ms": "6000"}
    group_broker = broker_factory(**GROUP_BROKER, **(session if protocol[0] == "consumer" else {}))
    topic, group = "fenced", "fenced-g"
    create_topic(group_broker, topic, 2)
    produce(group_broker, topic, values("f", 30))
    ends = end_offsets(group_broker, topic, 2)

    child = subprocess.Popen(
        [sys.executable, str(HERE / "fenced_member.py"), group_broker.bootstrap, group, topic, "2",
         protocol[0]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    survivor = None
    try:
        ready = read_line(child)
        assert ready.startswith("READY "), ready
        assert json.loads(ready[len("READY "):]) == {str(p): o for p, o in ends.items()}
        child.send_signal(signal.SIGSTOP)

        survivor = group_consumer(group_broker, group, protocol)
        survivor.subscribe([topic])
        wait_assignment([survivor], {(topic, 0), (topic, 1)})
        mine = [TopicPartition(topic, p, 1) for p in range(2)]
        result = survivor.commit(offsets=mine, asynchronous=False)
        assert all(tp.error is None for tp in result), result

        child.stdin.write(b"commit\n")
        child.stdin.flush()
        child.send_signal(signal.SIGCONT)
        outcome = read_line(child)
        print(f"the thawed member's commit: {outcome}")
        assert outcome.split()[0] == "FAILED" and outcome.split()[1] in FENCED[protocol[0]], outcome
        assert committed_offsets(group_broker, group, topic, 2) == {0: 1, 1: 1}
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
        child.wait(timeout=10)
        if survivor is not None:
            survivor.close()


KFAKE_848_ADMIN_VIEW = (
    "for a consumer-protocol group kfake's ConsumerGroupDescribe leaves the topic names of "
    "member assignments empty, and its ListGroups gives the group an empty ProtocolType, so "
    "librdkafka reports a simple group (Kafka fills both)"
)


@pytest.mark.parametrize(
    "protocol",
    [
        pytest.param(("classic", "range"), id="classic-range"),
        pytest.param(
            ("consumer", "uniform"), id="consumer-uniform", marks=pytest.mark.kfake_lacks(KFAKE_848_ADMIN_VIEW)
        ),
    ],
)
def test_admin_lists_and_describes_group(group_broker, protocol):
    """Two members share a 4-partition topic. ListGroups shows the group Stable with its type;
    DescribeGroups (or ConsumerGroupDescribe) shows both members with the assignments each
    client reports; OffsetFetch shows the offsets each member committed."""
    topic, group = "viewed", "viewed-g"
    create_topic(group_broker, topic, 4)
    produce(group_broker, topic, values("view", 40))
    members = [group_consumer(group_broker, group, protocol) for _ in range(2)]
    try:
        for m in members:
            m.subscribe([topic])
        owned, _ = wait_assignment(members, {(topic, p) for p in range(4)}, each_owns=True)
        for m, parts in zip(members, owned):
            commit = [TopicPartition(topic, p, 10 + p) for _, p in parts]
            assert all(tp.error is None for tp in m.commit(offsets=commit, asynchronous=False))

        client = admin(group_broker)
        want_type = ConsumerGroupType.CLASSIC if protocol[0] == "classic" else ConsumerGroupType.CONSUMER
        listing = {g.group_id: g for g in client.list_consumer_groups().result(timeout=WAIT_S).valid}
        assert group in listing, listing.keys()
        assert listing[group].state == ConsumerGroupState.STABLE
        assert listing[group].type == want_type

        desc = client.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
        assert desc.group_id == group
        assert desc.state == ConsumerGroupState.STABLE
        assert desc.type == want_type
        assert desc.partition_assignor == protocol[1]
        described = {m.member_id: m.assignment.topic_partitions for m in desc.members}
        assert {member: {tp.partition for tp in tps} for member, tps in described.items()} == {
            m.memberid(): {p for _, p in parts} for m, parts in zip(members, owned)
        }

        assert committed_offsets(group_broker, group, topic, 4) == {p: 10 + p for p in range(4)}

        # Last, as kfake fails only these for consumer-protocol groups: the described
        # assignments name their topic, and ListGroups gives a group of either protocol the
        # protocol type "consumer" (else clients take it for a simple, assign-only group).
        assert {tp.topic for tps in described.values() for tp in tps} == {topic}
        assert not listing[group].is_simple_consumer_group
    finally:
        for m in members:
            m.close()


def java_string_hash(s):
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_string(buf, at):
    n = int.from_bytes(buf[at:at + 2], "big", signed=True)
    return buf[at + 2:at + 2 + n].decode(), at + 2 + n


@pytest.mark.minikafka_only("reads the records of the internal topic __consumer_offsets")
def test_commit_is_a_kafka_format_record_in_consumer_offsets(group_broker):
    """A commit lands in `__consumer_offsets` (internal, 50 partitions) at the partition
    Kafka picks for the group (|String.hashCode| mod 50) as an offset-commit record in
    Kafka's key and value schemas; a user's produce to the internal topic is refused."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import KafkaError as KpKafkaError

    topic, group = "internal-view", "internal-view-g"
    create_topic(group_broker, topic, 1)
    produce(group_broker, topic, values("iv", 10))
    consumer = group_consumer(group_broker, group)
    consumer.subscribe([topic])
    try:
        wait_assignment([consumer], {(topic, 0)})
        assert consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)[0].error is None
    finally:
        consumer.close()

    kadmin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
    try:
        (meta,) = kadmin.describe_topics(["__consumer_offsets"])
    finally:
        kadmin.close()
    assert meta["error_code"] == 0 and meta["is_internal"], meta
    assert len(meta["partitions"]) == 50

    h = java_string_hash(group)
    partition = (0 if h == -(1 << 31) else abs(h)) % 50
    reader = KafkaConsumer(bootstrap_servers=group_broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = KpTopicPartition("__consumer_offsets", partition)
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        end = reader.end_offsets([tp])[tp]
        assert end > 0, f"nothing in __consumer_offsets partition {partition}"
        found = []
        for _ in range(int(WAIT_S / 0.5)):
            for batch in reader.poll(timeout_ms=500).values():
                for r in batch:
                    key_version = int.from_bytes(r.key[:2], "big")
                    if key_version not in (0, 1):
                        continue  # group metadata, not an offset commit
                    g, at = kafka_string(r.key, 2)
                    t, at = kafka_string(r.key, at)
                    p = int.from_bytes(r.key[at:at + 4], "big", signed=True)
                    value_version = int.from_bytes(r.value[:2], "big")
                    offset = int.from_bytes(r.value[2:10], "big", signed=True)
                    found.append((g, t, p, value_version, offset))
            if reader.position(tp) >= end:
                break
        commits = [(g, t, p, o) for g, t, p, _, o in found]
        assert (group, topic, 0, 7) in commits, found
        assert all(0 <= v <= 4 for *_, v, _ in found), found
    finally:
        reader.close()

    producer = KafkaProducer(bootstrap_servers=group_broker.bootstrap, acks="all", retries=0)
    try:
        with pytest.raises(KpKafkaError):
            producer.send("__consumer_offsets", value=b"forged", partition=partition).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=10)


@pytest.mark.parametrize(
    "protocol", [("classic", "cooperative-sticky"), ("consumer", "uniform")], ids=protocol_id
)
def test_confluent_regex_subscription_selects_matching_topics(group_broker, protocol):
    """subscribe(["^rx-.*"]) in a group (matched by the client in the classic protocol, by
    the broker's SubscribedTopicRegex in the consumer protocol) reads the records of the two
    matching topics and none of the third."""
    for name in ("rx-one", "rx-two", "not-rx"):
        create_topic(group_broker, name, 2)
        produce(group_broker, name, values(name, 10))
    consumer = group_consumer(group_broker, "rx-g", protocol, **{"topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe(["^rx-.*"])
    try:
        owned, read = wait_assignment([consumer], {(t, p) for t in ("rx-one", "rx-two") for p in range(2)})
        got = [v for _, _, v in read[0]] + [v for _, _, v in poll_values(consumer, 20 - len(read[0]))]
        assert sorted(got) == sorted(values("rx-one", 10) + values("rx-two", 10))
    finally:
        consumer.close()
