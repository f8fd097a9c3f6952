#!/usr/bin/env python3
"""The broker's share of one end-to-end record (produce → the long-polling consumer), from
its own system-call tracepoints:

    TRACE_EVENTS=syscalls:sys_enter_recvfrom,syscalls:sys_exit_recvfrom,syscalls:sys_enter_read,\
syscalls:sys_exit_read,syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg,syscalls:sys_enter_write,\
syscalls:sys_enter_writev \\
      benches/scripts/attach.sh trace OUT -- mk-bench side-by-side --only end_to_end --flush none --reps 1
    benches/scripts/e2e-timeline.py OUT/trace.PID

The two busiest connections are the producer's (small responses) and the consumer's (the
larger ones: Fetch responses with records). For every Produce request read, the next Fetch
response sent: request read → Fetch response sent is the broker's part of the record's trip
(append, answer the producer, wake the parked fetch, read, encode, send); also the producer's
answer and, for the consumer, Fetch response sent → its next Fetch request read (the client
and loopback). Prints p50 and p90 of each.
"""
import re
import subprocess
import sys
from bisect import bisect_left
from collections import defaultdict
from statistics import quantiles

READS = ("recvfrom", "read")
SENDS = ("sendto", "sendmsg", "write", "writev")


def main():
    out = subprocess.run(["perf", "script", "-i", sys.argv[1]], capture_output=True, text=True).stdout
    pending = {}  # tid -> fd of the read in progress
    reads, sends = defaultdict(list), defaultdict(list)  # fd -> [(t, bytes)]
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):\s*(.*)", line)
        if not m:
            continue
        tid, t, kind, call, args = m.group(2), float(m.group(3)) * 1e6, m.group(4), m.group(5), m.group(6)
        if kind == "enter":
            fd = re.search(r"fd: (0x[0-9a-f]+)", args)
            if not fd:
                continue
            if call in READS:
                pending[tid] = fd.group(1)
            elif call in SENDS:
                size = re.search(r"(?:len|count|vlen): (0x[0-9a-f]+)", args)
                size = int(size.group(1), 16) if size else 0
                if call == "write" and size == 8:
                    continue  # an eventfd wake-up between a Go broker's goroutines
                sends[fd.group(1)].append((t, size))
        elif call in READS and tid in pending:
            fd = pending.pop(tid)
            ret = int(args.split()[-1], 16)
            if 0 < ret < 1 << 32 and not (call == "read" and ret == 8):
                reads[fd].append((t, ret))
    # Connections are read and written; a log file is only written (a Go peer writes its files).
    connections = [fd for fd in sends if reads.get(fd)]
    busiest = sorted(connections, key=lambda fd: len(sends[fd]), reverse=True)[:2]
    if len(busiest) < 2:
        sys.exit("fewer than two connections with responses")
    # The consumer's connection: the larger responses (Fetch with records; writev/sendmsg
    # sizes are iovec counts, so compare counts of sends per read instead when sizes are 0).
    def mean_size(fd):
        return sum(s for _, s in sends[fd]) / len(sends[fd])
    producer, consumer = sorted(busiest, key=mean_size)
    if mean_size(producer) == mean_size(consumer):
        producer, consumer = sorted(busiest, key=lambda fd: len(reads[fd]) / max(1, len(sends[fd])))
    fetch_sent = [t for t, _ in sends[consumer]]
    fetch_read = [t for t, _ in reads[consumer]]
    produce_answered = [t for t, _ in sends[producer]]
    steps = defaultdict(list)
    for t, _ in reads[producer]:
        i = bisect_left(fetch_sent, t)
        if i < len(fetch_sent):
            steps["Produce read → Fetch response sent (in the broker)"].append(fetch_sent[i] - t)
        j = bisect_left(produce_answered, t)
        if j < len(produce_answered):
            steps["Produce read → its response sent"].append(produce_answered[j] - t)
    for t in fetch_sent:
        k = bisect_left(fetch_read, t)
        if k < len(fetch_read):
            steps["Fetch response sent → next Fetch read (consumer, loopback)"].append(fetch_read[k] - t)
    print(f"{sys.argv[1]}: producer fd {producer} ({len(reads[producer])} requests), "
          f"consumer fd {consumer} ({len(reads[consumer])} Fetch requests)")
    for name, d in steps.items():
        if len(d) >= 10:
            q = quantiles(d, n=10)
            print(f"  {name:60s} p50 {q[4]:8.1f} µs   p90 {q[8]:8.1f} µs   (n={len(d)})")


if __name__ == "__main__":
    main()
