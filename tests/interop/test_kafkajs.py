"""kafkajs (Node.js) transactions: commit and abort, read_committed against read_uncommitted,
and ``sendOffsets`` inside a transaction (the group's offset moves on commit, not on abort).

``kafkajs/transactions.js`` drives kafkajs 2.2.4 (``kafkajs/package.json``; ``run.sh``
installs it with npm when ``node`` is there) and prints what it saw; this test asserts on it.
Validated on kfake first (``INTEROP_BROKER=kfake bash run.sh -k kafkajs``: passed), then on
minikafka (``MINIKAFKA_BIN=target/debug/minikafka bash run.sh -k kafkajs``: passed, about 6 s;
node 20.20, 2026-12-02). Skipped, saying why, where ``node`` is not installed.
"""

import json
import pathlib
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
