#!/usr/bin/env python3
"""Per-record counts of an `attach.sh stat` run of `mk-bench side-by-side`.

    benches/scripts/per-record.py ATTACH_OUT SBS_OUT

ATTACH_OUT: attach.sh's OUT (cmd.PID and stat.PID of every broker); SBS_OUT: the side-by-side's
--out (side_by_side_runs.jsonl). Each broker is matched to its run by workload (its data
directory), broker (ours or the peer) and durability (ours `flush.policy=fsync`, the peer's
`-sync`); a workload that starts the broker twice (restart) is left out. Counts are the whole
broker life (topic creation, the consume run's fill, idle timers) divided by the run's records.
Prints a Markdown table.
"""
import json
import re
import sys
from pathlib import Path

COLUMNS = [
    ("task-clock", "CPU ms", None),
    ("context-switches", "ctx sw /rec", 1),
    ("io_uring:io_uring_submit_req", "uring submits /rec", 1),
    ("io_uring:io_uring_queue_async_work", "punts /rec", 1),
    ("syscalls:sys_enter_io_uring_enter", "io_uring_enter /rec", 1),
    (("syscalls:sys_enter_fdatasync", "syscalls:sys_enter_fsync"), "fdatasync+fsync /rec", 1),
    (("syscalls:sys_enter_pwrite64", "syscalls:sys_enter_pwritev2"), "pwrite /rec", 1),
    (("syscalls:sys_enter_read", "syscalls:sys_enter_recvfrom", "syscalls:sys_enter_recvmsg"),
     "recv+read /rec", 1),
    (("syscalls:sys_enter_write", "syscalls:sys_enter_writev", "syscalls:sys_enter_sendto",
      "syscalls:sys_enter_sendmsg"), "send+write /rec", 1),
    ("syscalls:sys_enter_futex", "futex /rec", 1),
]


def counts(path):
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*([\d,.]+)\s+(?:msec\s+)?([\w:-]+)", line)
        if m:
            out[m.group(2)] = float(m.group(1).replace(",", ""))
    return out


def main():
    attach, sbs = Path(sys.argv[1]), Path(sys.argv[2])
    runs = [json.loads(line) for line in (sbs / "side_by_side_runs.jsonl").read_text().splitlines()]
    seen = {}
    for cmd in sorted(attach.glob("cmd.*")):
        pid = cmd.suffix[1:]
        text = cmd.read_text()
        m = re.search(r"mk-bench-sbs-\d+/([a-z_]+)-\d+", text)
        stat = attach / f"stat.{pid}"
        if not m or not stat.exists():
            continue
        ours = "--override" in text
        durable = "flush.policy=fsync" in text if ours else " -sync" in text
        key = (m.group(1), ours, durable)
        seen.setdefault(key, []).append(counts(stat))
    print("| broker, flush | workload | records | " + " | ".join(c[1] for c in COLUMNS) + " |")
    print("|---|---|---:|" + "---:|" * len(COLUMNS))
    for run in runs:
        key = (run["workload"], run["side"] == "ours", run["durable"])
        stats = seen.get(key, [])
        if len(stats) != 1:
            continue
        c, records = stats[0], run["records"]
        cells = []
        for events, _, per in COLUMNS:
            events = events if isinstance(events, tuple) else (events,)
            if not all(e in c for e in events):
                cells.append("")
                continue
            total = sum(c[e] for e in events)
            cells.append(f"{total:.0f}" if per is None else f"{total / records:.3f}")
        who = ("ours " + ("fsync" if run["durable"] else "none")) if key[1] else \
            ("kfake " + ("-sync" if run["durable"] else "none"))
        print(f"| {who} | {run['workload']} | {records} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
