#!/bin/bash
# Attach perf to every broker an mk-bench run starts, for the runs' own counters:
#
#   benches/scripts/attach.sh stat|record|ops|trace|cmds OUT -- mk-bench side-by-side --only W --flush F ...
#
# Runs the command; meanwhile every process it starts (its descendants only, so brokers that
# other runs on the machine start are left alone) whose command line holds an mk-bench scratch
# directory (`mk-bench-sbs-` or `mk-bench-scale-`, i.e. both brokers, never the client) gets,
# once it is up, `perf stat -p PID` (stat: task-clock, context switches, io_uring submissions
# and punts to kernel workers, io_uring_enter, socket and file syscalls; written when the
# broker exits) or `perf record -F 999 -g -p PID` (record: where its CPU time goes; RECORD_ARGS
# replaces `-F 999 -g`, e.g. `-F 4999 --call-graph dwarf` for stacks through Rust code; read it
# with `perf report -i OUT/record.PID --no-children`) or, for ops, `perf record` of the
# io_uring submission and punt tracepoints (read the opcodes with
# `perf script -i OUT/ops.PID | grep -o 'opcode [A-Z_]*\|opcode=[0-9A-Z_]*' | sort | uniq -c`).
# trace records the perf events listed in TRACE_EVENTS (e.g. `ext4:ext4_sync_file_enter,…`) into
# OUT/trace.PID, for timelines with `perf script`.
# OUT/cmd.PID names each broker (cmds: only that, no perf; what the other modes would attach to).
# Counts include the broker's topic creation and idle timers; divide by the run's records.
set -u
MODE=$1; OUT=$2; shift 2; [ "$1" = "--" ] && shift
mkdir -p "$OUT"
EVENTS=task-clock,context-switches,cpu-migrations
EVENTS=$EVENTS,io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work
EVENTS=$EVENTS,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_fdatasync
EVENTS=$EVENTS,syscalls:sys_enter_fsync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_pwritev2
EVENTS=$EVENTS,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_recvmsg
EVENTS=$EVENTS,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendto
EVENTS=$EVENTS,syscalls:sys_enter_sendmsg,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait
EVENTS=$EVENTS,syscalls:sys_enter_epoll_pwait
"$@" &
RUN=$!
# The brokers among the descendants of $1 (the command, or a wrapper such as `timeout`).
brokers_under() {
  local child
  for child in $(pgrep -P "$1"); do
    tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null |
      grep -qE -- '--override log.dirs=/[^ ]*mk-bench-(sbs|scale)-|-data-dir /[^ ]*mk-bench-(sbs|scale)-' &&
      echo "$child"
    brokers_under "$child"
  done
}
declare -A seen
while kill -0 $RUN 2>/dev/null; do
  for pid in $(brokers_under "$RUN"); do
    [ -n "${seen[$pid]:-}" ] && continue
    seen[$pid]=1
    tr '\0' ' ' </proc/$pid/cmdline >"$OUT/cmd.$pid" 2>/dev/null || continue
    case $MODE in
      stat) perf stat -e "$EVENTS" -p "$pid" -o "$OUT/stat.$pid" >/dev/null 2>&1 & ;;
      record) perf record ${RECORD_ARGS:--F 999 -g} -p "$pid" -o "$OUT/record.$pid" >/dev/null 2>&1 & ;;
      ops) perf record -e io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work \
             -p "$pid" -o "$OUT/ops.$pid" >/dev/null 2>&1 & ;;
      trace) perf record -e "${TRACE_EVENTS:?trace needs TRACE_EVENTS}" -p "$pid" \
               -o "$OUT/trace.$pid" >/dev/null 2>&1 & ;;
      cmds) ;;
      *) echo "mode: stat, record, ops, trace or cmds" >&2; kill $RUN; exit 2 ;;
    esac
  done
  sleep 0.05
done
wait $RUN
RC=$?
sleep 1
echo "attach.sh: $(ls "$OUT" | grep -c '^cmd\.') brokers; results in $OUT" >&2
exit $RC
