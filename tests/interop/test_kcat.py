"""kcat (the system librdkafka, a second client version) against minikafka."""

import json
import subprocess

WAIT_S = 30


def kcat(broker, *args, stdin=None):
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        timeout=WAIT_S,
    )
    assert result.returncode == 0, f"kcat {args} failed: {result.stderr.decode(errors='replace')}"
    return result.stdout.decode()


def test_kcat_produce_then_consume_with_keys_and_headers(broker):
    """kcat -P -K: with headers, then kcat -C -e from the beginning: keys, values, headers
    and offsets 0..n-1 come back in order (the topic is auto-created with num.partitions=1)."""
    lines = [f"key{i}:value number {i}" for i in range(50)]
    kcat(broker, "-P", "-t", "kc", "-K:", "-H", "h1=v1", "-H", "h2=", stdin=("\n".join(lines) + "\n").encode())
    out = kcat(broker, "-C", "-t", "kc", "-o", "beginning", "-e", "-f", "%p|%o|%k|%s|%h\n")
    got = out.splitlines()
    want = [f"0|{i}|key{i}|value number {i}|h1=v1,h2=" for i in range(50)]
    assert got == want


def test_kcat_metadata_listing(broker):
    """kcat -L -J lists the single broker at our port and the topic with its partitions, each
    led by that broker, with no errors."""
    kcat(broker, "-P", "-t", "listed", stdin=b"x\n")
    meta = json.loads(kcat(broker, "-L", "-J"))
    assert len(meta["brokers"]) == 1
    node = meta["brokers"][0]
    assert node["name"].endswith(f":{broker.port}")
    topics = {t["topic"]: t for t in meta["topics"]}
    assert "listed" in topics, topics.keys()
    topic = topics["listed"]
    assert "error" not in topic or not topic["error"]
    assert [p["partition"] for p in topic["partitions"]] == [0]
    assert topic["partitions"][0]["leader"] == node["id"]


def test_kcat_num_partitions_for_auto_created_topics(broker_factory):
    """With num.partitions=4 an auto-created topic has 4 partitions; records sent to each
    partition with -p come back from it."""
    broker = broker_factory(num_partitions="4")
    for p in range(4):
        kcat(broker, "-P", "-t", "four", "-p", str(p), stdin=f"in-{p}\n".encode())
    meta = json.loads(kcat(broker, "-L", "-J", "-t", "four"))
    topic = [t for t in meta["topics"] if t["topic"] == "four"][0]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2, 3]
    for p in range(4):
        out = kcat(broker, "-C", "-t", "four", "-p", str(p), "-o", "beginning", "-e", "-f", "%p:%s\n")
        assert out.splitlines() == [f"{p}:in-{p}"]
