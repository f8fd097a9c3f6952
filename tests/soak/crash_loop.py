#!/usr/bin/env python3
"""Crash loop: SIGKILL the real broker under an idempotent acks=all producer, then check.

Runs the ``minikafka`` binary (``$MINIKAFKA_BIN``, else ``$CARGO_TARGET_DIR`` or ``target/``,
release before debug) with ``flush.policy=fsync`` on one data directory for the whole run. One
librdkafka producer (confluent-kafka; acks=all, enable.idempotence=true, keyed records over
several partitions) lives across every cycle. Each cycle starts the broker, times how long it
takes to be ready (it printed ``listening on`` and accepts a TCP connection), produces a batch
of records and SIGKILLs the broker once a random number (0 to the batch size) of
acknowledgements arrived in that cycle, so the kill lands during recovery, mid-stream with
records in flight, or once the producer is idle. Records in flight at a kill are retried by the producer after the
restart, which is what idempotence is for. Values are padded (``--value-bytes``) so that every
partition grows past the 64 KiB where ``log.preallocate`` starts extending its active segment:
later kills leave zero tails that the next start must cut (I190).

A consumer-group member (``subscribe``, classic protocol, ``--no-group`` to leave it out)
lives through every cycle too: it consumes the topic and commits its position asynchronously
every ``--commit-every`` records, one commit at a time. After every restart a second client reads the group's
committed offsets (OffsetFetch) and :func:`check_commits` asserts each is the last commit the
broker acknowledged before the kill or one sent after it (an acknowledged commit survives the
crash and is never replaced by an older one; nothing is invented).

At the end the broker starts once more, the producer flushes, a consumer reads every partition
from offset 0 to its high watermark, and :func:`check` compares: every acknowledged record
(partition, offset, key, value from its delivery report) is stored exactly once, at its
acknowledged offset; every partition's offsets are dense from 0; no value appears twice
(values are unique per record, so a second copy is a duplicate the producer's retry made).

Then, with no more kills, the group member consumes on to every partition's high watermark
(kills every few hundred milliseconds can keep it from ever finishing a join, so the cycles
alone may consume nothing), and :func:`check_group_read` asserts that what it consumed over
the whole run, resuming from its commits after each restart, covers every acknowledged record:
a commit past a record it never read would skip that record for good.

The kill points and keys come from one seeded RNG; the seed is printed, and ``--seed`` replays
the same schedule (which records are in flight at a kill still depends on timing). Exit status 0 means
every check passed, 1 that one failed (the problems are printed), 2 a usage or setup error.
"""

import argparse
import os
import pathlib
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from soak_broker import binary, free_port  # noqa: E402

TOPIC = "crash-loop"
START_LIMIT_S = 60
FINAL_FLUSH_LIMIT_S = 120
READ_LIMIT_S = 120
ACK_LIMIT_S = 60
GROUP_DRAIN_LIMIT_S = 120
# Values this long (~200 KB a partition over the CI's 30 cycles) take every partition past
# the 64 KiB where `log.preallocate` starts extending the active segment (I190), so most
# kills leave zero tails for recovery to cut.
VALUE_BYTES = 120


class Broker:
    """The broker child process on a fixed port and data directory, restarted each cycle."""

    def __init__(self, workdir, partitions, start_limit_s=START_LIMIT_S):
        self.workdir = workdir
        self.start_limit_s = start_limit_s
        self.port = free_port()
        self.data_dir = workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = workdir / "broker.log"
        self.partitions = partitions
        self.proc = None
        self.starts = 0

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    # What the broker prints once its listener is bound.
    ready_marker = "listening on"

    def command(self):
        """The broker's command line (a subclass may run another broker on the same port and
        data directory: txn_crash_loop.py's kfake)."""
        return [
            binary(),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"log.dirs={self.data_dir}",
            "--override", "flush.policy=fsync",
            # No schema registry: its default port 8081 is one per machine.
            "--override", "schema.registry.listeners=",
            "--override", f"num.partitions={self.partitions}",
            # The group consumer rejoins after every kill; Kafka's 3 s wait for more members
            # would outlast most cycles.
            "--override", "group.initial.rebalance.delay.ms=0",
        ]

    def start(self):
        """Starts the broker and returns the seconds until it was ready."""
        self.starts += 1
        args = self.command()
        log = open(self.log_path, "ab")
        log.write(f"\n----- start {self.starts} -----\n".encode())
        log.flush()
        began = time.monotonic()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        mark = f"----- start {self.starts} -----"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited during start {self.starts} with {self.proc.returncode}:\n{self.tail()}")
            if self.ready_marker in self.output().rsplit(mark, 1)[-1]:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return time.monotonic() - began
                except OSError:
                    pass
            if time.monotonic() - began > self.start_limit_s:
                stacks = self.dump_stacks()
                self.kill()
                raise RuntimeError(f"broker not ready within {self.start_limit_s} s (start {self.starts}; "
                                   f"its threads' stacks: {stacks}):\n{self.tail()}")
            time.sleep(0.005)

    def dump_stacks(self):
        """Writes every thread's backtrace of the (hung) broker next to its log, with gdb when
        installed; returns the file's path or why there is none."""
        if shutil.which("gdb") is None:
            return "gdb not installed"
        path = self.workdir / f"stacks-start-{self.starts}.txt"
        with open(path, "wb") as out:
            # Kernel side first (io_uring's worker threads show only there), then gdb's view.
            for task in sorted(pathlib.Path(f"/proc/{self.proc.pid}/task").iterdir()):
                try:
                    name = (task / "comm").read_text().strip()
                    kernel = (task / "stack").read_text()
                except OSError as e:
                    name, kernel = task.name, f"({e})\n"
                out.write(f"task {task.name} {name} (kernel stack):\n{kernel}\n".encode())
            out.flush()
            subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex", "thread apply all bt"],
                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=120,
                           check=False)
        return str(path)

    def kill(self):
        """SIGKILL and reap; a no-op when the broker is not running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def terminate(self):
        """SIGTERM (a clean stop: txn_crash_loop.py's --stop term) and reap; SIGKILL after 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def output(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines=40):
        return "\n".join(self.output().splitlines()[-lines:])


def check(acked, stored):
    """Returns the problems found comparing acknowledged records with the stored log.

    ``acked``: (partition, offset, key, value) per acknowledged record, from delivery reports.
    ``stored``: partition -> list of (offset, key, value) as read back, in log order.
    Checked: each acknowledged record is stored once, at its offset, with its key and value;
    each partition's offsets are dense from 0 (no gap, no repeat, in order); no value is
    stored twice anywhere (values are unique per produced record). An empty list means sound.
    """
    problems = []
    by_position = {}
    seen_values = {}
    for partition, records in sorted(stored.items()):
        expected = 0
        for offset, key, value in records:
            if offset != expected:
                problems.append(f"partition {partition}: offset {offset} where {expected} was due (offsets not dense)")
                expected = offset
            expected += 1
            if (partition, offset) in by_position:
                problems.append(f"partition {partition}: offset {offset} read twice")
            by_position[(partition, offset)] = (key, value)
            if value in seen_values:
                first = seen_values[value]
                problems.append(
                    f"duplicate: value {value!r} stored at partition {first[0]} offset {first[1]} "
                    f"and partition {partition} offset {offset}"
                )
            else:
                seen_values[value] = (partition, offset)
    acked_positions = {}
    for partition, offset, key, value in acked:
        if (partition, offset) in acked_positions:
            problems.append(
                f"partition {partition} offset {offset} acknowledged twice "
                f"({acked_positions[(partition, offset)]!r} and {value!r})"
            )
        acked_positions[(partition, offset)] = value
        found = by_position.get((partition, offset))
        if found is None:
            problems.append(f"lost: acknowledged {value!r} at partition {partition} offset {offset} is not stored")
        elif found != (key, value):
            problems.append(
                f"wrong record: partition {partition} offset {offset} acknowledged {key!r}={value!r}, "
                f"stored {found[0]!r}={found[1]!r}"
            )
    return problems


def check_group_read(acked, consumed):
    """Returns the problems found comparing acknowledged records with the group's reads.

    ``acked``: (partition, offset, key, value) per acknowledged record. ``consumed``:
    (partition, offset) -> value, every record the group member consumed over the run
    (after each restart it resumes from its committed offsets). Checked: the member read
    something, and every acknowledged record, at its offset with its value: its commits never
    skipped a record and it did not stop short of the end.
    """
    if acked and not consumed:
        return [f"the group consumed nothing of {len(acked)} acknowledged records"]
    problems = []
    for partition, offset, _, value in acked:
        got = consumed.get((partition, offset))
        if got is None:
            problems.append(f"group missed: acknowledged {value!r} at partition {partition} offset {offset}")
        elif got != value:
            problems.append(
                f"group read {got!r} at partition {partition} offset {offset}, acknowledged {value!r}"
            )
    return problems


def check_commits(last_acked, sent_since, observed):
    """Returns the problems found comparing the group's commits with the offsets read back.

    ``last_acked``: partition -> the offset of the last acknowledged OffsetCommit (the latest
    in time, not the highest: a consumer that rejoins re-reads from its committed offset and
    may commit a lower one). ``sent_since``: partition -> offsets of commits sent after it
    (refused, failed or in flight at the kill: the broker may have stored them). ``observed``:
    partition -> the committed offset OffsetFetch returned after a restart (-1 or missing:
    none). Checked: each committed offset is the last acknowledged commit or one sent after it
    — an acknowledged commit survived the kill, was not replaced by an older one, and nothing
    was invented.
    """
    problems = []
    for partition in sorted(set(last_acked) | set(sent_since) | set(observed)):
        got = observed.get(partition, -1)
        allowed = set(sent_since.get(partition, ()))
        allowed.add(last_acked.get(partition, -1))
        if got not in allowed:
            problems.append(
                f"commit lost: partition {partition} committed offset {got} after a restart; the last "
                f"acknowledged commit is {last_acked.get(partition, -1)}, sent after it "
                f"{sorted(sent_since.get(partition, ()))}"
            )
    return problems


class GroupConsumer:
    """A consumer-group member (subscribe, classic protocol) that commits as it consumes.

    Lives across every cycle like the producer. It commits its position asynchronously every
    ``commit_every`` records, one commit at a time (the next waits for the previous one's
    answer, so commits are answered in the order sent and a retried old commit cannot land
    after a newer one). After each restart :meth:`observe` reads the group's committed offsets
    with OffsetFetch from a second client and checks them (:func:`check_commits`).
    """

    GROUP = "crash-loop-group"

    def __init__(self, bootstrap, partitions, commit_every):
        from confluent_kafka import Consumer

        self.bootstrap = bootstrap
        self.partitions = partitions
        self.commit_every = commit_every
        self.last_acked = {}
        self.sent_since = {}
        self.in_flight = False
        self.consumed = 0
        self.commits_acked = 0
        self.commits_failed = 0
        self.since_commit = 0
        self.position = {}
        self.read = {}
        self.checks = 0
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": self.GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 30000,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            # librdkafka (2.16) parks a classic consumer in join-state wait-metadata while the
            # Metadata request its JoinGroup waits for is in flight; a kill that loses that
            # request leaves it there until the next periodic refresh (5 min by default):
            # other Metadata answers do not wake it (only the group's own, rdkafka_metadata.c).
            # Seed 858607126 hit it at the first kill: nothing consumed in 30 cycles and 120 s
            # after. Kafka would lose the request just the same; refresh every second, as
            # the producer does.
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 2,
            "on_commit": self._on_commit,
        })
        self.consumer.subscribe([TOPIC])

    def _on_commit(self, err, partitions):
        self.in_flight = False
        if err is not None:
            self.commits_failed += 1
            return
        self.commits_acked += 1
        for tp in partitions:
            if tp.error is None and tp.offset >= 0:
                self.last_acked[tp.partition] = tp.offset
                self.sent_since.pop(tp.partition, None)

    def poll(self, timeout=0):
        """Consumes what is there (waiting up to ``timeout`` for the first record) and commits
        every `commit_every` records."""
        from confluent_kafka import KafkaException, TopicPartition

        msg = self.consumer.poll(timeout)
        while msg is not None:
            if not msg.error():
                self.consumed += 1
                self.since_commit += 1
                self.position[msg.partition()] = msg.offset() + 1
                self.read[(msg.partition(), msg.offset())] = msg.value()
            msg = self.consumer.poll(0)
        if self.since_commit >= self.commit_every and self.position and not self.in_flight:
            offsets = [TopicPartition(TOPIC, p, o) for p, o in sorted(self.position.items())]
            try:
                self.consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException:
                self.commits_failed += 1  # e.g. no coordinator yet, during a restart
                return
            self.in_flight = True
            for p, o in self.position.items():
                self.sent_since.setdefault(p, set()).add(o)
            self.since_commit = 0

    def observe(self):
        """Reads the committed offsets (a second client, OffsetFetch); returns the problems."""
        from confluent_kafka import Consumer, TopicPartition

        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.GROUP,
                           "enable.auto.commit": False, "log_level": 2})
        try:
            committed = reader.committed([TopicPartition(TOPIC, p) for p in range(self.partitions)], timeout=30)
        finally:
            reader.close()
        # librdkafka says -1001 (OFFSET_INVALID) where the group has no committed offset.
        observed = {tp.partition: tp.offset for tp in committed if tp.error is None and tp.offset >= 0}
        self.checks += 1
        return check_commits(self.last_acked, self.sent_since, observed)

    def drain(self, highs):
        """Consumes, with the broker up for good, until its position reached every partition's
        high watermark in ``highs``; raises RuntimeError after GROUP_DRAIN_LIMIT_S."""
        deadline = time.monotonic() + GROUP_DRAIN_LIMIT_S
        while any(self.position.get(p, 0) < high for p, high in highs.items()):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the group did not consume to the high watermarks {highs} within "
                    f"{GROUP_DRAIN_LIMIT_S} s: positions {dict(sorted(self.position.items()))}")
            self.poll(0.2)

    def close(self):
        self.consumer.close()


def read_back(bootstrap, partitions):
    """Reads every partition from offset 0 to its high watermark."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "crash-loop-check",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    stored = {}
    try:
        highs = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
            highs[p] = high
            stored[p] = []
        pending = {p for p, h in highs.items() if h > 0}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in pending])
        deadline = time.monotonic() + READ_LIMIT_S
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read-back not done within {READ_LIMIT_S} s; partitions left {sorted(pending)}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= highs[msg.partition()]:
                        pending.discard(msg.partition())
                    continue
                raise RuntimeError(f"consumer error: {msg.error()}")
            p = msg.partition()
            if msg.offset() < highs[p]:
                stored[p].append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() + 1 >= highs[p]:
                pending.discard(p)
        return stored, highs
    finally:
        consumer.close()


def summary(times):
    return f"min {min(times) * 1000:.1f} ms, median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"


def run(args):
    from confluent_kafka import KafkaException, Producer

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"crash loop: seed {seed}, {args.cycles} cycles, {args.records} records per cycle of "
          f"{args.value_bytes} B, {args.partitions} partitions, binary {binary()}", flush=True)
    rng = random.Random(seed)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="minikafka-crash-loop-"))
    broker = Broker(workdir, args.partitions, args.start_limit_s)
    acked = []
    failed = []
    fatal = []
    lock = threading.Lock()

    def on_delivery(err, msg):
        with lock:
            if err is None:
                acked.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
            else:
                failed.append((err, msg.key(), msg.value()))
                if err.fatal():
                    fatal.append(str(err))

    ready_times = []
    producer = None
    try:
        ready_times.append(broker.start())
        producer = Producer({
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 300000,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            "retry.backoff.ms": 10,
            "topic.metadata.refresh.interval.ms": 1000,
            # Connection refused / closed by peer at every kill is expected; keep the output
            # to what matters (fatal errors still come through the delivery reports).
            "log_level": 2,
        })
        group = GroupConsumer(broker.bootstrap, args.partitions, args.commit_every) if args.group else None
        commit_problems = []
        produced = 0
        for cycle in range(args.cycles):
            if cycle > 0:
                ready_times.append(broker.start())
                if group is not None:
                    # Every acknowledged commit survived the kill (and nothing was invented).
                    commit_problems += group.observe()
                    if commit_problems:
                        raise RuntimeError(f"cycle {cycle}: {commit_problems[0]}")
            # The kill lands after a random number of this cycle's acknowledgements: 0 kills
            # during startup recovery or the producer's reconnect, `records` once it is idle.
            kill_after = rng.randint(0, args.records)
            with lock:
                acked_before = len(acked)
            cycle_began = time.monotonic()

            def kill_due():
                with lock:
                    return len(acked) - acked_before >= kill_after

            for i in range(args.records):
                value = f"c{cycle}-r{i}-".encode().ljust(args.value_bytes, b"v")
                key = f"k{rng.randrange(args.keys)}".encode()
                while True:
                    try:
                        producer.produce(TOPIC, value=value, key=key, on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.001)
                produced += 1
                producer.poll(0)
                if group is not None:
                    group.poll()
                if broker.alive() and kill_due():
                    broker.kill()  # the rest of the batch queues and goes after the restart
            while broker.alive():
                if kill_due():
                    broker.kill()
                    break
                producer.poll(0.001)
                if group is not None:
                    group.poll()
                if time.monotonic() - cycle_began > ACK_LIMIT_S:
                    raise RuntimeError(f"cycle {cycle}: {kill_after} acknowledgements not seen within {ACK_LIMIT_S} s")
            producer.poll(0)
            if fatal:
                raise RuntimeError(f"producer fatal error in cycle {cycle}: {fatal[0]}")
            if (cycle + 1) % max(1, args.cycles // 20) == 0 or cycle + 1 == args.cycles:
                with lock:
                    n_acked = len(acked)
                commits = (f", group consumed {group.consumed}, commits acknowledged {group.commits_acked}"
                           if group is not None else "")
                print(f"  cycle {cycle + 1}/{args.cycles}: {produced} produced, {n_acked} acknowledged, "
                      f"last restart {ready_times[-1] * 1000:.1f} ms{commits}", flush=True)
        ready_times.append(broker.start())
        left = producer.flush(FINAL_FLUSH_LIMIT_S)
        if left:
            raise RuntimeError(f"{left} records still undelivered {FINAL_FLUSH_LIMIT_S} s after the last restart")
        if fatal:
            raise RuntimeError(f"producer fatal error: {fatal[0]}")
        if group is not None:
            commit_problems += group.observe()
            if commit_problems:
                raise RuntimeError(f"after the last restart: {commit_problems[0]}")
        stored, highs = read_back(broker.bootstrap, args.partitions)
        if group is not None:
            consumed_in_cycles = group.consumed
            drain_began = time.monotonic()
            group.drain(highs)
            drain_s = time.monotonic() - drain_began
            group_problems = check_group_read(acked, group.read)
            if group_problems:
                raise RuntimeError(f"after the last restart: {group_problems[0]} "
                                   f"({len(group_problems)} problems)")
            # While the broker is up: librdkafka's close leaves the group through the
            # coordinator, and with the coordinator gone it can wait for it indefinitely.
            group.close()
    except (RuntimeError, KafkaException) as e:
        broker.kill()
        print(f"FAIL: {e}\nbroker log: {broker.log_path}", flush=True)
        return 1
    finally:
        broker.kill()
    problems = check(acked, stored)
    n_stored = sum(len(r) for r in stored.values())
    print(f"records: {produced} produced, {len(acked)} acknowledged, {len(failed)} failed, "
          f"{n_stored} stored (high watermarks {[highs[p] for p in range(args.partitions)]})")
    print(f"restart to ready over {len(ready_times)} starts: {summary(ready_times)}")
    if group is not None:
        print(f"group consumer: {group.consumed} records consumed ({consumed_in_cycles} during the cycles, "
              f"the rest in {drain_s:.1f} s after the last restart), every acknowledged record among them; "
              f"{group.commits_acked} commits acknowledged "
              f"({group.commits_failed} refused or failed, retried by the next), committed offsets checked "
              f"after {group.checks} restarts: each the last acknowledged commit or one sent after it; last acknowledged "
              f"{dict(sorted(group.last_acked.items()))}")
    if problems:
        print(f"FAIL: {len(problems)} problems (broker log: {broker.log_path}); first 20:")
        for problem in problems[:20]:
            print(f"  {problem}")
        return 1
    print(f"PASS: every acknowledged record stored exactly once at its offset; offsets dense; "
          f"no duplicates (seed {seed})")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50, help="kill/restart cycles (default 50)")
    parser.add_argument("--records", type=int, default=200, help="records produced per cycle (default 200)")
    parser.add_argument("--seed", type=int, default=None, help="RNG seed (default: random, printed)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (default 4)")
    parser.add_argument("--start-limit-s", type=float, default=START_LIMIT_S,
                        help=f"longest restart to ready before the run fails (default {START_LIMIT_S}; "
                             "more on a machine whose disk stalls)")
    parser.add_argument("--keys", type=int, default=64, help="distinct keys (default 64)")
    parser.add_argument("--value-bytes", type=int, default=VALUE_BYTES,
                        help=f"each value padded to this many bytes (default {VALUE_BYTES}: every partition "
                             "passes the 64 KiB where log.preallocate starts extending, I190, within 30 cycles)")
    parser.add_argument("--no-group", dest="group", action="store_false",
                        help="without the consumer-group consumer that commits during the cycles")
    parser.add_argument("--commit-every", type=int, default=20,
                        help="the group consumer commits after this many records (default 20)")
    args = parser.parse_args()
    if args.cycles < 1 or args.records < 0 or args.partitions < 1 or args.keys < 1 or args.value_bytes > 100_000:
        parser.error("cycles, partitions and keys must be positive; records not negative; "
                     "value bytes at most 100000")
    status = run(args)
    # Exit without running the clients' destructors: after a failure the group consumer is
    # still open on a killed broker, and destroying it would wait for that broker.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
