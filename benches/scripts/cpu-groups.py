#!/usr/bin/env python3
"""Where a broker's CPU goes, grouped by what the code is: reads a `perf record` with call
graphs (`RECORD_ARGS="-F 999 --call-graph dwarf,8192" benches/scripts/attach.sh record OUT -- …`)
through `perf script` and puts every sample in one group.

    benches/scripts/cpu-groups.py OUT/record.PID [RECORDS]

User-space samples go by their own function (CRC, record codec and validation, the Kafka
protocol codec, allocation, memory copies — named by the first caller of ours —, monoio's
runtime and timers, monoio's ring code, the broker's own code); kernel samples go by what
the kernel was doing for us, from the innermost frame that says so (the socket, a file
write, a file read, fsync, an io_uring punt to a worker, io_uring submission, timers, a
context switch or wait, entry/exit of a system call). Prints each group's share of the
samples, with µs per record when RECORDS is given (samples × the sampling period).
"""
import re
import subprocess
import sys
from collections import Counter

USER = [
    ("CRC-32C", r"crc32c::|crc32"),
    ("record batches: decode, validate, walk (core::record)", r"minikafka_core::record|RecordIter|walk_records|read_bytes_field|read_varint|minikafka_core::batch"),
    ("Kafka protocol codec (kafka-protocol, precheck, header)", r"kafka_protocol::|minikafka_broker::protocol::|parse_header|precheck"),
    ("allocation (malloc, free, realloc)", r"^(malloc|cfree|free|_int_malloc|_int_free|_int_realloc|realloc|calloc|malloc_consolidate|unlink_chunk|tcache|__rust_alloc|__rust_dealloc|__rust_realloc|alloc::alloc|__libc_malloc|__libc_free|_int_free_merge_chunk|_int_free_create_chunk|_int_free_maybe_consolidate)"),
    ("monoio runtime, tasks, timers", r"monoio::(runtime|task|scheduler|time|blocking)|scoped_tls|__vdso_clock_gettime|clock_gettime|std::time|Instant::now"),
    ("monoio ring code (submit, reap)", r"monoio::driver|io_uring::|io_uring|_io_uring|rust_io_uring|__sys_io_uring"),
]
COPY = r"__memmove|__memcpy|__memset|memcpy|memmove"
KERNEL = [
    ("kernel: fsync (ext4_sync_file, jbd2, block)", r"ext4_sync_file|vfs_fsync|jbd2|blkdev_issue_flush|io_fsync"),
    ("kernel: io_uring punt (queue and wake a worker)", r"io_wq_enqueue|io_queue_iowq|io_wq_submit_work|io_worker_handle_work|io_wq_worker"),
    ("kernel: socket send/receive, loopback TCP", r"tcp_|sock_|__sys_sendto|__sys_recvfrom|__sys_sendmsg|__sys_recvmsg|net_rx_action|inet_|ip_|skb_|__dev_queue_xmit|io_recv|io_send"),
    ("kernel: file write (page cache, ext4)", r"generic_perform_write|ext4_buffered_write_iter|ext4_file_write_iter|vfs_write|vfs_writev|do_pwritev|io_write|ext4_da_write"),
    ("kernel: file read (page cache)", r"filemap_read|ext4_file_read_iter|vfs_read|io_read|generic_file_read"),
    ("kernel: timers (io_uring timeouts, hrtimers)", r"io_timeout|hrtimer|io_link_timeout|io_kill_timeout|timerqueue"),
    ("kernel: context switch, wait, wake-up", r"schedule|finish_task_switch|io_cqring_wait|try_to_wake_up|__wake_up|ttwu|futex"),
    ("kernel: io_uring submission and completion", r"io_submit_sqes|io_uring_enter|io_issue_sqe|__io_|io_handle_tw|io_cqring|tctx_task_work|io_req_|io_cq_|io_poll|io_arm_poll|io_async_cancel|io_cancel"),
    ("kernel: syscall entry/exit, interrupts", r"do_syscall_64|entry_SYSCALL|syscall_exit|exit_to_user_mode|irqentry|asm_sysvec|asm_common_interrupt|__irq_exit|handle_softirqs"),
]


def samples(path):
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,ip,sym,dso,period"],
                         capture_output=True, text=True).stdout
    for block in out.split("\n\n"):
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        head = lines[0].split()
        period = next((int(w) for w in reversed(head) if w.isdigit()), 1)
        frames = []
        for l in lines[1:]:
            m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", l)
            if m:
                frames.append((m.group(1), re.sub(r"\+0x[0-9a-f]+$", "", m.group(2)), m.group(3)))
        yield head[0], period, frames


def group(frames):
    if not frames:
        return "unknown"
    ip, sym, dso = frames[0]
    if "kernel" not in dso:
        if re.search(COPY, sym):
            for _, s, _ in frames[1:]:
                if re.search(r"minikafka|monoio|kafka_protocol|bytes::", s) and not re.search(COPY, s):
                    return "memory copy, called from " + shorten(s)
            return "memory copy"
        # The leaf function and the functions inlined into it (same address), innermost first.
        inlined = [s for i, s, _ in frames if i == ip]
        for s in inlined:
            for name, pat in USER:
                if re.search(pat, s):
                    return name
        if any(re.search(r"minikafka", s) for s in inlined):
            return "broker code (other)"
        return "user space (other: " + shorten(inlined[-1]) + ")"
    for _, s, d in frames:
        if "kernel" not in d:
            break
        for name, pat in KERNEL:
            if re.search(pat, s):
                return name
    return "kernel: other"


def shorten(sym):
    sym = re.sub(r"<[^<>]*>", "", sym)
    sym = re.sub(r"<[^<>]*>", "", sym)
    sym = sym.replace("::{{closure}}", "").replace(" (inlined)", "")
    return "::".join(sym.split("::")[-3:])


def main():
    path = sys.argv[1]
    records = float(sys.argv[2]) if len(sys.argv) > 2 else None
    groups, total, total_period, threads = Counter(), 0, 0, Counter()
    for comm, period, frames in samples(path):
        thread = "iou-wrk" if comm.startswith("iou-wrk") else comm
        groups[(group(frames))] += period
        threads[thread] += period
        total += 1
        total_period += period
    print(f"{path}: {total} samples, {total_period / 1e6:.0f} ms of CPU" +
          (f", {total_period / 1e3 / records:.3f} µs per record" if records else ""))
    print("threads: " + ", ".join(f"{t} {100 * p / total_period:.0f} %" for t, p in threads.most_common()))
    for name, p in groups.most_common():
        share = 100 * p / total_period
        if share < 0.5:
            continue
        extra = f"  {p / 1e3 / records:.3f} µs/rec" if records else ""
        print(f"  {share:5.1f} %  {name}{extra}")


if __name__ == "__main__":
    main()
