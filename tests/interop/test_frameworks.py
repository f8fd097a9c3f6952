"""A real stream-processing framework in its exactly-once mode: faust-streaming.

``faust_eos_app.py`` is an ordinary faust application (``processing_guarantee="exactly_once"``:
faust's transactional producers, one per input partition, aiokafka underneath) that reads
``eos-in`` and writes each record transformed to ``eos-out`` (tagged with which start of the
worker wrote it). The test fills the input, starts the worker as a separate process, SIGKILLs
it twice mid-stream (once some output is written, read_uncommitted: the kill lands with
transactions open), restarts it each time (same application id: the same group and
transactional ids, so the new producers fence the dead ones and their open transactions are
aborted), lets the last start commit the whole input, and checks in read_committed:
- nothing is lost: every input record is in the output;
- the group's committed offsets are the input's end;
- a record is in the output twice only as faust-streaming 0.15.3's own flaw makes it, never
  twice from one start of the worker.

Why not "exactly once" outright: faust-streaming 0.15.3 is not exactly-once under SIGKILL, on
any broker. Its commit runs in another task than the agent (the commit timer, or the fetcher
every ``broker_commit_every`` acks) and sends the offsets of *acknowledged* events, while the
agent's output for the event it is still processing is already in the same producer's open
transaction; that transaction commits the output without the input's offset, and after the
kill the restarted worker processes the event again. Seen on minikafka (2026-12-02, reading
the data directory): transaction (producer id 3, epoch 0) committed ``T(r120)`` in
``eos-out`` partition 1 with TxnOffsetCommit ``eos-in`` [1] = 74, and ``r120`` *is* offset 74
of ``eos-in`` partition 1; the next start re-read from 74 and committed ``T(r120)`` again (2
such duplicates of 600 in that run). The broker did what it was asked; the strict
exactly-once check of the broker under kill -9 is ``tests/soak/txn_crash_loop.py``, whose
application commits only what it has processed.

On kfake (``INTEROP_BROKER=kfake bash run.sh -k faust``, how this test was validated first)
the same run has more duplicates (36 and 105 in two runs, against 2 and 71 on minikafka, the 71
from before ``sink_metadata`` put the output in the transaction at all), since kfake also
lets a fenced producer's open transaction become visible (see test_transactions.py).

Other faust-streaming 0.15.3 behaviour the application works around, not the broker's:
the output must go to a topic the application also consumes (``sink_metadata`` in
faust_eos_app.py), and its clean stop can hang in exactly-once mode (so the last start is
killed too, once the whole input is committed).

Every wait is bounded (``WAIT_S``); nothing asserts how fast anything happens.
"""

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from group_clients import GROUP_BROKER, QUIET, WAIT_S, create_topic, produce

HERE = pathlib.Path(__file__).resolve().parent
RECORDS = 600
PARTITIONS = 2
APP_ID = "eos-faust"


def read(broker, isolation):
    """Every value of ``eos-out`` ``isolation`` lets a consumer read, from 0 to the end."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"faust-check-{isolation}",
        "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "isolation.level": isolation, **QUIET,
    })
    try:
        consumer.assign([TopicPartition("eos-out", p, 0) for p in range(PARTITIONS)])
        out, at_end = [], set()
        deadline = time.monotonic() + WAIT_S
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"reading eos-out ({isolation}): {len(out)} read"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            out.append(msg.value())
        return out
    finally:
        consumer.close()


def committed(broker):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": APP_ID, **QUIET})
    try:
        return [tp.offset for tp in consumer.committed(
            [TopicPartition("eos-in", p) for p in range(PARTITIONS)], timeout=WAIT_S)]
    finally:
        consumer.close()


class Worker:
    """``faust_eos_app.py worker`` as a child process, its output appended to one log."""

    def __init__(self, broker, workdir):
        self.env = dict(os.environ, BOOTSTRAP=broker.bootstrap, FAUST_APP_ID=APP_ID)
        self.workdir = workdir
        self.log = workdir / "faust.log"
        self.proc = None
        self.runs = 0

    def start(self):
        self.runs += 1
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "faust_eos_app.py"), "worker", "-l", "warn"],
                env=dict(self.env, WORKER_RUN=str(self.runs)), cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)

    def stop(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"faust worker ignored {sig!r} for {WAIT_S} s:\n{self.log.read_text()[-3000:]}")

    def running(self):
        return self.proc.poll() is None


def wait_for(what, condition, worker):
    deadline = time.monotonic() + WAIT_S * 2
    while not condition():
        assert worker.running(), f"faust worker exited with {worker.proc.returncode}:\n" \
                                 f"{worker.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S * 2} s:\n" \
                                            f"{worker.log.read_text()[-3000:]}"
        time.sleep(0.1)


def test_faust_exactly_once_survives_sigkill_of_the_app(broker_factory, tmp_path):
    pytest.importorskip("faust", reason="faust-streaming is not installed (run.sh installs it)")
    broker = broker_factory(**GROUP_BROKER)
    create_topic(broker, "eos-in", PARTITIONS)
    create_topic(broker, "eos-out", PARTITIONS)
    inputs = [f"r{i}".encode() for i in range(RECORDS)]
    placed = produce(broker, "eos-in", inputs, keys=[f"k{i % 16}".encode() for i in range(RECORDS)])
    ends = [sum(1 for (p, _) in placed.values() if p == partition) for partition in range(PARTITIONS)]
    worker = Worker(broker, tmp_path)
    try:
        for kill_at in (RECORDS // 4, RECORDS // 2):
            worker.start()
            # Killed once its output (written, not necessarily committed) passes kill_at.
            wait_for(f"{kill_at} records written", lambda: len(read(broker, "read_uncommitted")) >= kill_at, worker)
            worker.stop(signal.SIGKILL)
        worker.start()
        wait_for("the whole input committed", lambda: committed(broker) == ends, worker)
    finally:
        # Killed at the end too: the whole input is committed by then, and faust-streaming
        # 0.15.3's clean stop (SIGTERM) can hang in exactly-once mode (its last commit raises
        # aiokafka's IllegalOperation "Not in the middle of a transaction" and the worker waits
        # on, seen on kfake and minikafka alike).
        if worker.proc is not None:
            worker.stop(signal.SIGKILL)
    out = read(broker, "read_committed")
    written = {}
    for value in out:
        source, _, run = value.rpartition(b"|w")
        written.setdefault(source, []).append(int(run))
    expected = {b"T(" + v + b")" for v in inputs}
    assert set(written) == expected, f"lost: {sorted(expected - set(written))[:10]}, " \
                                     f"foreign: {sorted(set(written) - expected)[:10]}"
    for source, runs in written.items():
        assert len(runs) == len(set(runs)), f"{source!r} written twice by one start: {runs}"
    duplicated = {s: r for s, r in written.items() if len(r) > 1}
    print(f"faust: {len(out)} records read committed for {RECORDS} inputs over {worker.runs} starts; "
          f"{len(duplicated)} inputs twice (faust's commit flaw, see the docstring): "
          f"{sorted(duplicated.items())[:10]}")
    assert committed(broker) == ends
