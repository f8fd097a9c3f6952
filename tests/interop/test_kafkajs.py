"""kafkajs (Node.js) transactions: commit and abort, read_committed against read_uncommitted,
and ``sendOffsets`` inside a transaction (the group's offset moves on commit, not on abort);
and ``@kafkajs/confluent-schema-registry`` 3.9.0 against the built-in schema registry
(``kafkajs/schema_registry.js``): register (the same id twice), encode, produce, consume,
decode; an allowed evolution and a refused (409) one. kfake has no registry: minikafka only.

``kafkajs/transactions.js`` drives kafkajs 2.2.4 (``kafkajs/package.json``; ``run.sh``
installs it with npm when ``node`` is there) and prints what it saw; this test asserts on it.
Validated on kfake first (``INTEROP_BROKER=kfake bash run.sh -k kafkajs``: passed), then on
minikafka (``MINIKAFKA_BIN=target/debug/minikafka bash run.sh -k kafkajs``: passed, about 6 s;
node 20.20, 2026-12-02). Skipped, saying why, where ``node`` is not installed.
"""

import json
import pathlib
import re
import shutil
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT_LIMIT_S = 100


@pytest.fixture
def node():
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed")
    if not (HERE / "kafkajs" / "node_modules" / "kafkajs").is_dir():
        pytest.fail("kafkajs is not installed: `npm ci --prefix tests/interop/kafkajs` (run.sh does it)")
    return path


def test_kafkajs_transactions_commit_abort_and_send_offsets(broker_factory, node):
    broker = broker_factory(group_initial_rebalance_delay_ms="0")
    done = subprocess.run([node, str(HERE / "kafkajs" / "transactions.js"), broker.bootstrap],
                          capture_output=True, text=True, timeout=SCRIPT_LIMIT_S, check=False)
    assert done.returncode == 0, f"kafkajs script failed:\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["committed"] == ["j0", "j1", "j2"], "read_committed: the committed records only"
    assert report["uncommitted"] == ["j0", "j1", "jx", "j2"], "read_uncommitted: the aborted one too"
    assert report["offsetsAfterCommit"] == "3", "sendOffsets in a committed transaction"
    assert report["offsetsAfterAbort"] == "3", "sendOffsets in an aborted transaction changes nothing"
    assert report["out"] == ["o0", "o1"], "the aborted transaction's output is not read committed"


@pytest.mark.minikafka_only("kfake has no schema registry (the Confluent REST API on schema.registry.listeners)")
def test_kafkajs_confluent_schema_registry_round_trip(broker_factory, node):
    if not (HERE / "kafkajs" / "node_modules" / "@kafkajs" / "confluent-schema-registry").is_dir():
        pytest.fail("@kafkajs/confluent-schema-registry is not installed: `npm ci --prefix tests/interop/kafkajs`")
    broker = broker_factory(schema_registry_listeners="http://127.0.0.1:0",
                            group_initial_rebalance_delay_ms="0")
    found = re.findall(r"minikafka: schema registry on (http://\S+)", broker.output())
    assert found, broker.output()
    done = subprocess.run([node, str(HERE / "kafkajs" / "schema_registry.js"), broker.bootstrap, found[-1]],
                          capture_output=True, text=True, timeout=SCRIPT_LIMIT_S, check=False)
    assert done.returncode == 0, f"kafkajs script failed:\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["id"] == report["again"] == report["latest"], report
    assert report["wireIds"] == [report["id"]] * 2, report
    assert report["decoded"] == [{"name": "ada", "favorite": 7}, {"name": "grace", "favorite": 42}]
    assert report["v2"] != report["id"], report
    assert report["incompatible"] == 409, report
