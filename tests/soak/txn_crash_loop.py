#!/usr/bin/env python3
"""Transaction crash loop: SIGKILL the broker under a consume-transform-produce application.

Runs the ``minikafka`` binary (``$MINIKAFKA_BIN``, else the newest build; ``--broker kfake``
runs the peer ``kfake-runner`` with ``-data-dir`` and ``-sync`` instead, to tell a harness
mistake from a broker's) with ``flush.policy=fsync`` on one data directory for the whole run.

Before the first kill, an input topic is filled with ``--records`` numbered records
(``r<i>``, keyed, over ``--partitions`` partitions; idempotent acks=all producer). Then an
exactly-once application runs in the main thread for the whole campaign, as a real one is
written with confluent-kafka (librdkafka): a ``read_committed`` consumer in a group
(``subscribe``, no auto-commit) and a transactional producer (one ``transactional.id``). It
takes up to ``--commit-every`` records, and in one transaction writes each one transformed
(``T(r<i>)|t<txn>``: the input's name and the number of the transaction that wrote it) to the
output topic, in the input's partition, adds the consumer's positions with
``send_offsets_to_transaction`` and commits. It handles errors as librdkafka documents: a
retriable error (a timeout while the broker is down) retries the same call; an abortable one
aborts the transaction and rewinds the consumer to the group's committed offsets; a fatal
one (fenced, or the producer's state lost) closes the producer, makes a new one with the same
``transactional.id`` and ``init_transactions`` (which fences the old one and aborts its open
transaction), then rewinds. It also aborts ``--abort-share`` of its transactions itself
(seeded), after the output and the offsets were sent, and redoes them: aborted records are
in the output topic throughout, for the kills to land among. Its ``transaction.timeout.ms`` is
8 s (``--txn-timeout-ms``) and the broker looks for timed-out transactions every second, so a
transaction left open across a long downtime may be aborted by the coordinator after the
restart, which the application meets as an abortable or fatal error; and in ``--stall-share``
(1 %) of its transactions the application stalls 10 s, past that timeout, before sending its
offsets, so the coordinator aborts the transaction and fences it (a new producer follows).
Every transaction's outcome as
the application saw it is kept: committed (``commit_transaction`` returned), aborted
(``abort_transaction`` returned) or unknown (a fatal error or a new producer came first).

A controller thread kills the broker ``--cycles`` times: each cycle starts the broker (same
port and data directory), waits until the application has committed a random number (0 to
``--txns-per-cycle``, seeded) of transactions since this start, waits a random 0–50 ms more
(so the kill lands before, inside or after ``send_offsets``/``EndTxn`` and its markers),
sends SIGKILL, and waits a random 0–200 ms before the next start (one restart in ten: 2 to
12 s, past the application's 10 s call timeout). Should the input run out (no record for
5 s), the kill comes anyway. Afterwards the broker starts once more and the application runs
until the group's committed offsets (OffsetFetch, stable) equal the input's end offsets.

Then :func:`check` compares the ``read_committed`` output (read from offset 0 to the end by
a fresh consumer) with the input and the outcomes: every input record appears exactly once,
transformed and in its input's partition; no record of a transaction the application saw
aborted is visible; a transaction seen committed is visible whole, and any visible
transaction (an unknown one included) is visible whole (all or nothing); nothing that no
transaction wrote is visible; and the group's committed offsets equal the input's end offsets.

The kill points come from one seeded RNG (``--seed`` replays the schedule; what is in flight at
a kill still depends on timing). Exit status 0: every check passed; 1: one failed (printed);
2: a usage or setup error. A call that hangs past 360 s ends the run with every thread's
stack (``kill -USR1`` prints them any time); ``TXN_CRASH_DEBUG=eos,protocol`` turns on the
producer's librdkafka debug log.
"""

import argparse
import faulthandler
import os
import pathlib
import random
import re
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from crash_loop import Broker, summary  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
INPUT = "txn-crash-in"
OUTPUT = "txn-crash-out"
GROUP = "txn-crash-loop"
TXN_ID = "txn-crash-loop-app"
CALL_TIMEOUT_S = 10
PROGRESS_LIMIT_S = 120
FINISH_LIMIT_S = 300
READ_LIMIT_S = 120
KILL_JITTER_S = 0.05
IDLE_KILL_S = 5
STALL_LIMIT_S = 3 * PROGRESS_LIMIT_S
DOWN_JITTER_S = 0.2
LONG_DOWN_SHARE = 0.1

OUT_VALUE = re.compile(rb"^T\((.*)\)\|t(\d+)$")


def transform(value, txn):
    """The output value for input ``value`` written by transaction number ``txn``."""
    return b"T(" + value + b")|t" + str(txn).encode()


def check(inputs, txns, output, committed, ends):
    """Returns the problems found in a run's result (an empty list: sound).

    ``inputs``: input value -> its partition (every record of the input topic).
    ``txns``: transaction number -> (outcome, [input values it wrote]); outcome is
    ``committed`` (commit_transaction returned), ``aborted`` (abort_transaction returned) or
    ``unknown`` (neither: a kill or a fatal error came first).
    ``output``: (partition, offset, value) of every record a read_committed consumer reads from
    the output topic, from offset 0 to the end.
    ``committed``: input partition -> the group's committed offset; ``ends``: input partition
    -> the input's end offset.
    Checked: every input appears exactly once in the output, transformed, in its partition; no
    aborted transaction's record is visible; each visible transaction is visible whole, and a
    committed one is visible; nothing not written by a known transaction is visible; the
    committed offsets are the input's end offsets.
    """
    problems = []
    seen = {}
    visible = {}
    for partition, offset, value in output:
        m = OUT_VALUE.match(value)
        if m is None:
            problems.append(f"foreign record: {value!r} at output partition {partition} offset {offset}")
            continue
        source, txn = m.group(1), int(m.group(2))
        if source not in inputs:
            problems.append(f"invented record: {value!r} at output partition {partition} offset {offset} "
                            f"(no input {source!r})")
            continue
        if inputs[source] != partition:
            problems.append(f"wrong partition: {value!r} in output partition {partition}, its input in "
                            f"{inputs[source]}")
        if source in seen:
            problems.append(f"duplicate: input {source!r} in the output at {seen[source]} and "
                            f"(partition {partition}, offset {offset}, {value!r})")
        else:
            seen[source] = (partition, offset, value)
        visible.setdefault(txn, set()).add(source)
    for source in inputs:
        if source not in seen:
            problems.append(f"lost: input {source!r} is not in the read_committed output")
    for txn, sources in sorted(visible.items()):
        if txn not in txns:
            problems.append(f"transaction t{txn} is visible but the application never began it")
            continue
        outcome, wrote = txns[txn]
        if outcome == "aborted":
            problems.append(f"aborted record visible: transaction t{txn} was aborted, "
                            f"{len(sources)} of its records are read committed")
        elif sources != set(wrote):
            problems.append(f"part of a transaction visible: t{txn} wrote {len(set(wrote))} records, "
                            f"{len(sources)} are read committed")
    for txn, (outcome, wrote) in sorted(txns.items()):
        if outcome == "committed" and wrote and txn not in visible:
            problems.append(f"committed transaction lost: t{txn} ({len(wrote)} records) was acknowledged "
                            f"committed and none of it is read committed")
    for partition in sorted(set(ends) | set(committed)):
        got, end = committed.get(partition, -1), ends.get(partition, 0)
        if got != end:
            problems.append(f"committed offset: input partition {partition} committed at {got}, "
                            f"its end is {end}")
    return problems


class TxnBroker(Broker):
    """minikafka as the crash loop runs it, checking for timed-out transactions every second
    (Kafka's 10 s would outlast most cycles)."""

    def command(self):
        return super().command() + [
            "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"]


class KfakeBroker(Broker):
    """The peer kfake on the same port and data directory (``-sync``: fsync every write)."""

    ready_marker = "kfake-runner: pid"

    def command(self):
        runner = os.environ.get("KFAKE_BIN", str(REPO.parent / "shared" / "peers" / "kfake" / "kfake-runner"))
        return [runner, "-port", str(self.port), "-data-dir", str(self.data_dir), "-sync",
                "-partitions", str(self.partitions)]


class App:
    """The consume-transform-produce application (runs in the caller's thread)."""

    def __init__(self, bootstrap, commit_every, log, verbose=False, rng=None, abort_share=0.0,
                 txn_timeout_ms=60000, stall_share=0.0):
        from confluent_kafka import Consumer

        self.bootstrap = bootstrap
        self.commit_every = commit_every
        self.log = log
        self.verbose = verbose
        self.rng = rng or random.Random(0)
        self.abort_share = abort_share
        self.txn_timeout_ms = txn_timeout_ms
        self.stall_share = stall_share
        self.stalls = 0
        self.chosen_aborts = 0
        self.txns = {}  # number -> (outcome, [input values])
        self.next_txn = 0
        self.committed_txns = 0  # read by the controller thread
        self.aborted_txns = 0
        self.unknown_txns = 0
        self.producers_made = 0
        self.retries = 0
        self.rewinds = 0
        self.processed = 0
        self.last_batch = time.monotonic()  # read by the controller thread
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 30000,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            # As crash_loop.py's group member: a kill that loses the Metadata request a
            # JoinGroup waits for would park librdkafka until its next periodic refresh.
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 2,
            "enable.metrics.push": False,
            "metadata.recovery.strategy": "none",  # as the producer's, below
        })
        self.consumer.subscribe([INPUT])
        self.producer = None
        self.new_producer()

    def new_producer(self):
        """A fresh transactional producer with the one transactional.id, initialised (retried
        while the broker is down or the old transaction is still being aborted)."""
        from confluent_kafka import KafkaException, Producer

        # The old one (if any) is dropped as it is: a fatal producer accepts no more calls.
        self.producer = None
        self.producers_made += 1
        producer = Producer({
            "bootstrap.servers": self.bootstrap,
            "transactional.id": TXN_ID,
            # Shorter than the longest downtime: a transaction open across it is aborted by
            # the coordinator after the restart (with an epoch bump), which the application
            # meets as an abortable or fatal error.
            "transaction.timeout.ms": self.txn_timeout_ms,
            "message.timeout.ms": self.txn_timeout_ms,
            "linger.ms": 5,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            "retry.backoff.ms": 10,
            "log_level": 2,
            "enable.metrics.push": False,
            # librdkafka (2.16) re-bootstraps once every broker is down (each kill), and a
            # send_offsets_to_transaction after that can wait forever, past its timeout, on
            # the decommissioned broker handle (seen against minikafka and kfake alike: its
            # TxnOffsetCommit is never sent). A one-broker cluster has nothing to re-bootstrap.
            "metadata.recovery.strategy": "none",
            # TXN_CRASH_DEBUG=eos (librdkafka's debug contexts) shows the producer's transaction steps.
            **({"debug": os.environ["TXN_CRASH_DEBUG"], "log_level": 7} if os.environ.get("TXN_CRASH_DEBUG") else {}),
        })
        deadline = time.monotonic() + PROGRESS_LIMIT_S
        while True:
            try:
                producer.init_transactions(CALL_TIMEOUT_S)
                break
            except KafkaException as e:
                err = e.args[0]
                if time.monotonic() > deadline:
                    raise RuntimeError(f"init_transactions not done within {PROGRESS_LIMIT_S} s: {err}")
                if err.fatal():
                    raise RuntimeError(f"init_transactions failed fatally on a new producer: {err}")
                self.retries += 1
        self.producer = producer

    def rewind(self):
        """Seeks every assigned partition back to the group's committed offset (what an
        aborted or unknown transaction left off is consumed again)."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        self.rewinds += 1
        deadline = time.monotonic() + PROGRESS_LIMIT_S
        while True:
            try:
                assignment = self.consumer.assignment()
                if not assignment:
                    return
                for tp in self.consumer.committed(assignment, timeout=CALL_TIMEOUT_S):
                    offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                return
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rewind not done within {PROGRESS_LIMIT_S} s: {e.args[0]}")
                self.retries += 1
                time.sleep(0.05)

    def retrying(self, what, call):
        """Runs a transactional call, retrying it on retriable errors; returns None on success
        or the KafkaError that stopped it (abortable or fatal)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + PROGRESS_LIMIT_S
        while True:
            try:
                call()
                return None
            except KafkaException as e:
                err = e.args[0]
                if err.fatal() or err.txn_requires_abort() or not err.retriable():
                    return err
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} still failing after {PROGRESS_LIMIT_S} s: {err}")
                self.retries += 1

    def step(self):
        """Consumes up to commit_every records and processes them in one transaction; returns
        the number of records taken (0: nothing there)."""
        from confluent_kafka import KafkaException

        batch = [m for m in self.consumer.consume(num_messages=self.commit_every, timeout=0.1)
                 if m.error() is None]
        if not batch:
            return 0
        self.last_batch = time.monotonic()
        txn = self.next_txn
        self.next_txn += 1
        sources = [m.value() for m in batch]
        self.txns[txn] = ("unknown", sources)
        producer = self.producer

        def work():
            producer.begin_transaction()
            for m in batch:
                while True:
                    try:
                        producer.produce(OUTPUT, key=m.key(), value=transform(m.value(), txn),
                                         partition=m.partition())
                        break
                    except BufferError:
                        producer.poll(0.01)
            if self.rng.random() < self.stall_share:
                # A stall past transaction.timeout.ms (a slow record, a GC pause): the
                # coordinator aborts the transaction and bumps the epoch meanwhile.
                self.stalls += 1
                producer.flush(CALL_TIMEOUT_S)
                time.sleep(self.txn_timeout_ms / 1000 + 2)
            positions = self.consumer.position(self.consumer.assignment())
            producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(),
                                                 CALL_TIMEOUT_S)

        try:
            work()
            err = None
        except KafkaException as e:
            err = e.args[0]
            if err.retriable() and not err.txn_requires_abort() and not err.fatal():
                # send_offsets timed out (the broker is down): retrying it alone is allowed.
                err = self.retrying("send_offsets_to_transaction", lambda: producer.send_offsets_to_transaction(
                    self.consumer.position(self.consumer.assignment()),
                    self.consumer.consumer_group_metadata(), CALL_TIMEOUT_S))
        if err is None and self.rng.random() < self.abort_share:
            # The application's own failure (a bad record, a downstream refusal): abort after
            # the output and the offsets were sent, rewind, and do the batch again.
            err = self.retrying("abort_transaction", lambda: producer.abort_transaction(CALL_TIMEOUT_S))
            if err is None:
                self.txns[txn] = ("aborted", sources)
                self.aborted_txns += 1
                self.chosen_aborts += 1
                self.rewind()
                return len(batch)
        if err is None:
            err = self.retrying("commit_transaction", lambda: producer.commit_transaction(CALL_TIMEOUT_S))
            if err is None:
                self.txns[txn] = ("committed", sources)
                self.committed_txns += 1
                self.processed += len(batch)
                return len(batch)
        if not err.fatal():
            abort_err = self.retrying("abort_transaction", lambda: producer.abort_transaction(CALL_TIMEOUT_S))
            if self.verbose:
                self.log(f"    t{txn}: {err}; aborted: {abort_err}")
            if abort_err is None:
                self.txns[txn] = ("aborted", sources)
                self.aborted_txns += 1
                self.rewind()
                return len(batch)
            err = abort_err
        if not err.fatal():
            raise RuntimeError(f"transaction t{txn}: abort_transaction failed without a fatal error: {err}")
        # Fatal (fenced, or the producer's id lost): a new producer, whose init_transactions
        # fences this one and aborts its open transaction; the outcome of t{txn} stays unknown.
        self.log(f"    t{txn}: fatal {err}; new producer")
        self.unknown_txns += 1
        self.new_producer()
        self.rewind()
        return len(batch)

    def caught_up(self, ends):
        """Whether the group's committed offsets (stable) are the input's end offsets."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            committed = self.consumer.committed([TopicPartition(INPUT, p) for p in ends], timeout=CALL_TIMEOUT_S)
        except KafkaException:
            return False
        return all(tp.offset == ends[tp.partition] for tp in committed)

    def committed_offsets(self, partitions):
        from confluent_kafka import TopicPartition

        committed = self.consumer.committed([TopicPartition(INPUT, p) for p in range(partitions)],
                                            timeout=CALL_TIMEOUT_S)
        return {tp.partition: tp.offset for tp in committed if tp.error is None and tp.offset >= 0}


def fill_input(bootstrap, records, partitions, keys):
    """Creates both topics and writes the input (acks=all, idempotent); returns value ->
    partition and the input's end offsets."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    for future in admin.create_topics([NewTopic(INPUT, partitions, 1), NewTopic(OUTPUT, partitions, 1)],
                                      operation_timeout=30).values():
        future.result(timeout=60)
    placed = {}
    failed = []

    def on_delivery(err, msg):
        if err is None:
            placed[msg.value()] = msg.partition()
        else:
            failed.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "log_level": 2})
    for i in range(records):
        while True:
            try:
                producer.produce(INPUT, key=f"k{i % keys}".encode(), value=f"r{i}".encode(),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) or failed or len(placed) != records:
        raise RuntimeError(f"filling the input: {len(placed)} of {records} acknowledged, errors {failed[:3]}")
    ends = {}
    counts = {}
    for p in placed.values():
        counts[p] = counts.get(p, 0) + 1
    for p in range(partitions):
        ends[p] = counts.get(p, 0)  # a fresh topic without transactions: offsets dense from 0
    return placed, ends


def read_output(bootstrap, partitions, isolation):
    """Every record ``isolation`` lets a consumer read from the output, 0 to the end, as
    (partition, offset, value)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{GROUP}-check-{isolation}",
        "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "isolation.level": isolation, "log_level": 2,
    })
    out = []
    try:
        highs = {p: consumer.get_watermark_offsets(TopicPartition(OUTPUT, p), timeout=30)[1]
                 for p in range(partitions)}
        pending = {p for p, h in highs.items() if h > 0}
        consumer.assign([TopicPartition(OUTPUT, p, 0) for p in pending])
        deadline = time.monotonic() + READ_LIMIT_S
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading the output ({isolation}) not done within {READ_LIMIT_S} s; "
                                   f"partitions left {sorted(pending)}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    # The end of what this isolation may read: the high watermark (every
                    # transaction is finished by now, so the last stable offset is there too).
                    if msg.offset() >= highs[msg.partition()]:
                        pending.discard(msg.partition())
                    continue
                raise RuntimeError(f"consumer error reading the output: {msg.error()}")
            out.append((msg.partition(), msg.offset(), msg.value()))
        return out, highs
    finally:
        consumer.close()


def run(args):
    from confluent_kafka import KafkaException

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"txn crash loop: seed {seed}, {args.cycles} cycles, {args.records} input records, "
          f"{args.partitions} partitions, commit every {args.commit_every}, broker {args.broker}, "
          f"stop by {'SIGTERM' if args.stop == 'term' else 'SIGKILL'}", flush=True)
    rng = random.Random(seed)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="minikafka-txn-crash-loop-"))
    broker = (KfakeBroker if args.broker == "kfake" else TxnBroker)(workdir, args.partitions, args.start_limit_s)
    ready_times = []
    began = time.monotonic()
    stop = threading.Event()
    controller_error = []
    idle_kills = [0]
    long_downs = [0]
    lock = threading.Lock()

    def log(line):
        with lock:
            print(line, flush=True)

    app = None
    try:
        ready_times.append(broker.start())
        inputs, ends = fill_input(broker.bootstrap, args.records, args.partitions, args.keys)
        log(f"  input filled: {args.records} records, end offsets {[ends[p] for p in range(args.partitions)]}")
        app = App(broker.bootstrap, args.commit_every, log, args.verbose,
                  random.Random(rng.random()), args.abort_share, args.txn_timeout_ms, args.stall_share)

        def controller():
            try:
                for cycle in range(args.cycles):
                    if cycle > 0:
                        if rng.random() < LONG_DOWN_SHARE:
                            # Down past the application's call timeout: its calls fail
                            # (retriable) and are retried, or its transaction is aborted.
                            long_downs[0] += 1
                            time.sleep(rng.uniform(2, CALL_TIMEOUT_S + 2))
                        else:
                            time.sleep(rng.uniform(0, DOWN_JITTER_S))
                        ready_times.append(broker.start())
                    target = app.committed_txns + rng.randint(0, args.txns_per_cycle)
                    jitter = rng.uniform(0, KILL_JITTER_S)
                    waited = time.monotonic()
                    while app.committed_txns < target and not stop.is_set():
                        if time.monotonic() - max(waited, app.last_batch) > IDLE_KILL_S:
                            # No record for a while: the input is done, or the application is
                            # waiting on something the kill may shake loose. The final phase
                            # still requires the whole input to be committed.
                            idle_kills[0] += 1
                            break
                        time.sleep(0.002)
                    if stop.is_set():
                        return
                    time.sleep(jitter)
                    if args.stop == "term":
                        broker.terminate()
                    else:
                        broker.kill()
                    if (cycle + 1) % max(1, args.cycles // 20) == 0 or cycle + 1 == args.cycles:
                        log(f"  cycle {cycle + 1}/{args.cycles}: transactions committed {app.committed_txns}, "
                            f"aborted {app.aborted_txns}, unknown {app.unknown_txns}; records committed "
                            f"{app.processed}; producers {app.producers_made}; last restart "
                            f"{ready_times[-1] * 1000:.1f} ms")
                ready_times.append(broker.start())
            except Exception as e:  # noqa: BLE001 - reported by the main thread
                controller_error.append(e)

        thread = threading.Thread(target=controller, daemon=True)
        thread.start()
        deadline = None
        idle_since = None
        while True:
            # A call that never returns (past its own timeout) stops the run with every
            # thread's stack rather than hanging it.
            faulthandler.dump_traceback_later(STALL_LIMIT_S, exit=True)
            if controller_error:
                raise controller_error[0]
            if app.step():
                idle_since = None
                continue
            if thread.is_alive():
                continue
            # The cycles are over and the broker is up: run until the group has committed the
            # whole input.
            deadline = deadline or time.monotonic() + FINISH_LIMIT_S
            if time.monotonic() > deadline:
                raise RuntimeError(f"the application did not commit the whole input within {FINISH_LIMIT_S} s "
                                   f"after the last start (committed {app.committed_offsets(args.partitions)}, "
                                   f"ends {ends})")
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 1.0:
                if app.caught_up(ends):
                    break
                if args.verbose:
                    log(f"    idle: assignment {app.consumer.assignment()}, committed "
                        f"{app.committed_offsets(args.partitions)}")
                idle_since = time.monotonic()
        faulthandler.cancel_dump_traceback_later()
        if controller_error:
            raise controller_error[0]
        committed = app.committed_offsets(args.partitions)
        output, highs = read_output(broker.bootstrap, args.partitions, "read_committed")
        everything, _ = read_output(broker.bootstrap, args.partitions, "read_uncommitted")
        app.consumer.close()  # while the broker is up (leaving the group needs its coordinator)
    except (RuntimeError, KafkaException) as e:
        stop.set()
        broker.kill()
        print(f"FAIL: {e}\nbroker log: {broker.log_path}", flush=True)
        return 1
    finally:
        stop.set()
        broker.kill()
    problems = check(inputs, app.txns, output, committed, ends)
    duration = time.monotonic() - began
    print(f"application: {app.next_txn} transactions begun: {app.committed_txns} committed (acknowledged), "
          f"{app.aborted_txns} aborted ({app.chosen_aborts} by choice), {app.unknown_txns} of unknown outcome (fatal error, new producer); "
          f"{app.producers_made} producers (init_transactions); {app.rewinds} rewinds; {app.retries} retried calls; "
          f"{app.stalls} stalls past the transaction timeout")
    print(f"output: {len(output)} records read committed of {len(everything)} stored "
          f"(high watermarks {[highs[p] for p in range(args.partitions)]}, markers included); "
          f"group committed offsets {[committed.get(p, -1) for p in range(args.partitions)]}, "
          f"input ends {[ends[p] for p in range(args.partitions)]}")
    print(f"broker starts: {broker.starts} ({args.cycles} {'SIGTERM' if args.stop == 'term' else 'kill -9'}, {idle_kills[0]} of them with the application "
          f"idle {IDLE_KILL_S} s; {long_downs[0]} restarts after 2 to {CALL_TIMEOUT_S + 2} s down); restart to ready: {summary(ready_times)}; "
          f"{duration:.0f} s in all")
    if problems:
        print(f"FAIL: {len(problems)} problems (broker log: {broker.log_path}); first 20:")
        for problem in problems[:20]:
            print(f"  {problem}")
        return 1
    print(f"PASS: every input record read committed exactly once, transformed; no aborted or partial "
          f"transaction visible; committed offsets at the input's end (seed {seed})")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50, help="kill/restart cycles (default 50)")
    parser.add_argument("--records", type=int, default=None,
                        help="input records (default 100 per cycle, at least 1,000)")
    parser.add_argument("--commit-every", type=int, default=10,
                        help="records per transaction, at most (default 10)")
    parser.add_argument("--txns-per-cycle", type=int, default=10,
                        help="a kill comes after 0 to this many committed transactions (default 10)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of both topics (default 4)")
    parser.add_argument("--keys", type=int, default=64, help="distinct input keys (default 64)")
    parser.add_argument("--seed", type=int, default=None, help="RNG seed (default: random, printed)")
    parser.add_argument("--broker", choices=("minikafka", "kfake"), default="minikafka",
                        help="the broker under test (kfake: the peer, -data-dir -sync)")
    parser.add_argument("--abort-share", type=float, default=0.1,
                        help="share of transactions the application aborts itself and redoes (default 0.1)")
    parser.add_argument("--txn-timeout-ms", type=int, default=8000,
                        help="the producer's transaction.timeout.ms (default 8000: shorter than the "
                             "longest downtime, so some transactions time out across a restart)")
    parser.add_argument("--stall-share", type=float, default=0.01,
                        help="share of transactions in which the application stalls past its "
                             "transaction timeout (default 0.01)")
    parser.add_argument("--stop", choices=("kill", "term"), default="kill",
                        help="how each cycle stops the broker: SIGKILL (default) or SIGTERM (a clean "
                             "stop: checks the harness on a broker that keeps state only at a clean stop)")
    parser.add_argument("--verbose", action="store_true", help="say what the application does while idle")
    parser.add_argument("--start-limit-s", type=float, default=60,
                        help="longest restart to ready before the run fails (default 60)")
    args = parser.parse_args()
    if args.records is None:
        args.records = max(1000, 100 * args.cycles)
    if args.cycles < 1 or args.records < 1 or args.commit_every < 1 or args.partitions < 1 \
            or args.keys < 1 or args.txns_per_cycle < 0:
        parser.error("cycles, records, commit-every, partitions and keys must be positive")
    # `kill -USR1 <pid>` prints every thread's Python stack (where a hung run waits).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    status = run(args)
    sys.stdout.flush()
    sys.stderr.flush()
    # Without the clients' destructors: after a failure they are open on a killed broker.
    os._exit(status)


if __name__ == "__main__":
    main()
