#!/usr/bin/env python3
"""Where the time of one sequential durable write goes, from a broker's own tracepoints:

    TRACE_EVENTS=syscalls:sys_exit_recvfrom,syscalls:sys_exit_read,syscalls:sys_enter_sendto,\
syscalls:sys_enter_write,syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,io_uring:io_uring_submit_req,io_uring:io_uring_complete,\
ext4:ext4_sync_file_enter,ext4:ext4_sync_file_exit \\
      benches/scripts/attach.sh trace OUT -- mk-bench side-by-side --only sequential --flush fsync --reps 1
    benches/scripts/write-timeline.py OUT/trace.PID

One write = the request read from the socket (`recvfrom` or `read` returning bytes), the log's
sync (an io_uring FSYNC submission, or fsync system calls: ext4_sync_file on any thread), then
the response written to the socket (`sendto`, or `write`/`writev`/`sendmsg` to an fd it never
synced; add syscalls:sys_enter_writev,syscalls:sys_enter_sendmsg for the portable backend).
(A run without syncs, flush none, gives request → response and response → next request.)
Prints the p50 and p90 of each step over every write that has all of them:
  request → sync issued     the broker's own work before the sync (decode, validate, write)
  sync issued → ext4 starts  handing the sync to the thread that runs it (io_uring: the punt to
                             an iou-wrk worker and its wake-up)
  ext4_sync_file            the filesystem's sync itself (the first enter to the last exit)
  ext4 done → response       back to the connection: completion, wake-up, encode, send
  response → next request    outside the broker: loopback, the client, and our wake-up for it
"""
import re
import subprocess
import sys
from statistics import quantiles


def events(path):
    out = subprocess.run(["perf", "script", "-i", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)", line)
        if m:
            yield m.group(1), float(m.group(3)) * 1e6, m.group(4), m.group(5)


def main():
    writes, cur, last_response = [], None, None
    any_sync = False  # a run without syncs (flush none): a write is request → response
    synced_fds = set()
    for comm, t, ev, args in events(sys.argv[1]):
        if ev in ("syscalls:sys_exit_recvfrom", "syscalls:sys_exit_read"):
            ret = int(args.split()[-1], 16)
            # 8-byte reads are wake-ups between a Go broker's goroutines (an eventfd), not requests.
            if 0 < ret < 1 << 32 and ret != 8 and (cur is None or "sync_exit" in cur or not any_sync):
                cur = {"request": t, "previous_response": last_response}
        elif cur is None:
            continue
        elif ev == "io_uring:io_uring_submit_req" and "opcode FSYNC" in args:
            cur.setdefault("sync_issued", t)
            any_sync = True
        elif ev == "ext4:ext4_sync_file_enter":
            any_sync = True
            cur.setdefault("sync_issued", t)
            cur.setdefault("sync_enter", t)
        elif ev == "ext4:ext4_sync_file_exit":
            cur["sync_exit"] = t
        elif ev in ("syscalls:sys_enter_fsync", "syscalls:sys_enter_fdatasync"):
            synced_fds.add(re.search(r"fd: (0x[0-9a-f]+)", args).group(1))
        elif ev in ("syscalls:sys_enter_sendto", "syscalls:sys_enter_write",
                    "syscalls:sys_enter_writev", "syscalls:sys_enter_sendmsg") and (
                "sync_exit" in cur or not any_sync):
            fd = re.search(r"fd: (0x[0-9a-f]+)", args).group(1)
            count = re.search(r"(?:count|len): (0x[0-9a-f]+)", args)
            # A peer's `write`s: skip its log files (those it fsyncs) and 8-byte eventfd wake-ups.
            if ev != "syscalls:sys_enter_sendto" and (
                    fd in synced_fds or (count and int(count.group(1), 16) == 8)):
                continue
            cur["response"] = t
            writes.append(cur)
            last_response, cur = t, None
    steps = [
        ("request → sync issued", "request", "sync_issued"),
        ("sync issued → ext4 starts", "sync_issued", "sync_enter"),
        ("ext4_sync_file", "sync_enter", "sync_exit"),
        ("ext4 done → response", "sync_exit", "response"),
        ("request → response (in the broker)", "request", "response"),
        ("  of it outside ext4_sync_file", None, None),
        ("response → next request (outside)", "previous_response", "request"),
    ]
    print(f"{sys.argv[1]}: {len(writes)} writes")
    for name, a, b in steps:
        if a is None:
            d = [w["response"] - w["request"] - (w["sync_exit"] - w["sync_enter"])
                 for w in writes if "sync_enter" in w]
        else:
            d = [w[b] - w[a] for w in writes if w.get(a) is not None and w.get(b) is not None]
        if len(d) < 10:
            print(f"  {name:38s} (too few: {len(d)})")
            continue
        q = quantiles(d, n=10)
        print(f"  {name:38s} p50 {q[4]:8.1f} µs   p90 {q[8]:8.1f} µs   (n={len(d)})")


if __name__ == "__main__":
    main()
