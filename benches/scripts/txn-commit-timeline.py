#!/usr/bin/env python3
"""Where one transaction's commit goes: a librdkafka (confluent-kafka) transactional producer
committing every N records, its requests on the wire and the broker's file syncs on one clock.

    python3 benches/scripts/txn-commit-timeline.py HOST:PORT BROKER_PID DATA_DIR [N=1] [COUNT=100]

Start the broker yourself (ours with `flush.policy=fsync`, or kfake-runner with `-sync`) with
its data in DATA_DIR. The script records, with `perf` on CLOCK_MONOTONIC (root):
- the client's `sendmsg`/`recvmsg` (librdkafka's broker threads: `rdk:broker-1` is the
  bootstrap connection, which carries the transaction coordinator's requests, `rdk:broker0`
  the partition leader's, which carries Produce);
- the broker's `ext4_sync_file` enter/exit (any thread: io_uring workers included), named by
  the file's directory under DATA_DIR (the inode looked up there);
- each transaction's `begin`+`produce` time, the end of `flush()` (every delivery report, as
  mk-bench's commit timer covers) and the return of `commit_transaction()`.

It prints each step's median over the timed commits (the first is untimed):
  produce → AddPartitionsToTxn sent   the client's own wait (librdkafka registers partitions
                                      on a 1 ms timer), on any broker
  AddPartitionsToTxn                  sent → answered, with the syncs the broker made meanwhile
  answer → Produce sent, Produce, answer → EndTxn sent, EndTxn, answer → commit returned
and the full timeline of the median commit. A commit whose requests cannot be told apart (a
retry, a refusal, a second Produce) is left out of the medians and counted.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from statistics import median

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def run_producer(bootstrap, per_txn, count, marks_path):
    topic = "txn-tl-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic,
                         "linger.ms": 0, "socket.nagle.disable": True, "acks": "all"})
    producer.init_transactions(30)
    marks = []
    for _ in range(count + 1):
        producer.begin_transaction()
        t0 = time.monotonic()
        for _ in range(per_txn):
            producer.produce(topic, b"t" * 100, partition=0)
        producer.flush(30)
        t1 = time.monotonic()
        producer.commit_transaction(30)
        marks.append((t0, t1, time.monotonic()))
    with open(marks_path, "w") as f:
        json.dump(marks[1:], f)


def perf_events(path):
    out = subprocess.run(["perf", "script", "-i", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(.+?)\s+\d+\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)", line)
        if m:
            yield m.group(1), float(m.group(2)), m.group(3), m.group(4)


def main():
    bootstrap, pid, data_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    per_txn = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    tmp = tempfile.mkdtemp(prefix="txn-timeline-")
    broker_data, client_data = f"{tmp}/broker.data", f"{tmp}/client.data"
    marks_path = f"{tmp}/marks.json"
    perf_broker = subprocess.Popen(
        ["perf", "record", "-k", "CLOCK_MONOTONIC", "-o", broker_data, "-p", pid,
         "-e", "ext4:ext4_sync_file_enter,ext4:ext4_sync_file_exit"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    if os.fork() == 0:  # the client under its own perf, so only its threads are recorded
        os.execvp("perf", ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-o", client_data,
                           "-e", "syscalls:sys_exit_sendmsg,syscalls:sys_exit_recvmsg", "--",
                           sys.executable, __file__, "--producer", bootstrap, str(per_txn),
                           str(count), marks_path])
    os.wait()
    perf_broker.send_signal(signal.SIGINT)
    perf_broker.wait()

    names = {}
    for line in subprocess.run(["find", data_dir, "-printf", "%i %P\n"],
                               capture_output=True, text=True).stdout.splitlines():
        ino, path = line.split(" ", 1)
        names[ino] = path.split("/")[0]
    events = []  # (t, kind, detail)
    open_sync = {}
    for _, t, ev, args in perf_events(broker_data):
        ino = re.search(r"ino (\d+)", args).group(1)
        if ev.endswith("enter"):
            open_sync[ino] = t
        elif ino in open_sync:
            start = open_sync.pop(ino)
            events.append((start, "sync", (names.get(ino, ino), t - start)))
    for comm, t, ev, args in perf_events(client_data):
        n = int(args.split()[-1], 16)
        if 0 < n < 1 << 40 and n != 8:  # 8 bytes: librdkafka's wake-up pipe, not a request
            events.append((t, "send" if "sendmsg" in ev else "recv", (comm, n)))
    events.sort()
    marks = json.load(open(marks_path))

    steps = ["produce → AddPartitionsToTxn sent", "AddPartitionsToTxn", "answer → Produce sent",
             "Produce", "answer → EndTxn sent", "EndTxn", "answer → commit returned"]
    table, syncs_in, skipped, commits = {s: [] for s in steps}, {}, 0, []
    for t0, t1, t2 in marks:
        window = [e for e in events if t0 <= e[0] <= t2]
        wire = [e for e in window if e[1] in ("send", "recv")]
        kinds = [e[1] for e in wire]
        if kinds != ["send", "recv"] * 3:
            skipped += 1
            continue
        times = [t0] + [e[0] for e in wire] + [t2]
        for i, step in enumerate(steps):
            table[step].append((times[i + 1] - times[i]) * 1e6)
        for i, req in ((1, "AddPartitionsToTxn"), (3, "Produce"), (5, "EndTxn")):
            files = [e[2][0] for e in window if e[1] == "sync" and times[i] <= e[0] <= times[i + 1]]
            syncs_in.setdefault(req, []).append(files)
        commits.append(((t2 - t0) * 1e6, t0, t2))
    print(f"{len(marks)} commits of {per_txn} record(s); {skipped} left out (other request pattern)")
    for step in steps:
        if table[step]:
            line = f"  {step:36s} p50 {median(table[step]):7.0f} µs"
            if step in syncs_in:
                common = max(set(map(tuple, syncs_in[step])), key=syncs_in[step].count)
                line += f"   syncs meanwhile (most often): {', '.join(common) or 'none'}"
            print(line)
    lat = sorted(c[0] for c in commits)
    if lat:
        print(f"  commit p50 {median(lat):.0f} µs (these commits)")
        _, t0, t2 = sorted(commits)[len(commits) // 2]
        print("median commit's timeline (µs from produce):")
        for t, kind, detail in events:
            if t0 - 0.0005 <= t <= t2:
                if kind == "sync":
                    print(f"  {(t - t0) * 1e6:+8.0f}  broker sync {detail[0]} ({detail[1] * 1e6:.0f} µs)")
                else:
                    print(f"  {(t - t0) * 1e6:+8.0f}  client {kind} {detail[1]} B [{detail[0]}]")
    syncs = sorted(d[1] for _, k, d in events if k == "sync")
    if syncs:
        print(f"broker syncs: {len(syncs)}, p50 {syncs[len(syncs) // 2] * 1e6:.0f} µs, "
              f"{len(syncs) / max(1, len(marks)):.1f} per commit")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--producer":
        run_producer(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main()
