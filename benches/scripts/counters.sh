#!/bin/bash
# Load-independent counters of the broker (syscalls, io_uring submissions and punts, context
# switches): figures for a loaded machine, where wall-clock times mean little.
#
#   benches/scripts/counters.sh restart BIN_DIR strace|perf|opcodes|cpu|bare [PARTITIONS] [SHARDS]
#     Start BIN_DIR/minikafka (flush none), create a topic of PARTITIONS (4000) partitions,
#     write 3 × PARTITIONS keyed records with BIN_DIR/mk, kill -9, start it again under the
#     counter and time until `mk topics describe` answers; the restarted broker is killed
#     with SIGKILL too, so the counts are startup (and the describe probes) only.
#     FLUSH=fsync runs both brokers with flush.policy=fsync (the restart then syncs what it
#     recovered, I8).
#   benches/scripts/counters.sh produce BIN_DIR strace|perf [VALUE_BYTES] [SHARDS]
#     SHARDS (1) shards, flush none: `mk-rtt` (target/debug or MK_RTT) sends one-record
#     Produce requests of VALUE_BYTES (100) one at a time for 3 s on a blocking socket, then
#     3 s through the async client; divide the counts by the requests it reports (both runs'
#     req/s × 3). RTT_SECONDS=0 sends none: the startup and topic creation alone, to subtract.
#   benches/scripts/counters.sh fetch BIN_DIR strace|perf|opcodes [RECORDS]
#     One shard, flush none: the broker is filled with RECORDS (200000) records of 256 B by
#     BIN_DIR/mk; then the counter attaches to it (1 s before) for `mk consume` of every
#     record from the beginning (1 MiB partition fetches). Prints the Fetch requests it
#     answered meanwhile (its metrics endpoint): divide by them.
#
# Writes under ${OUT:-/tmp/mk-counters}/<mode>-<what>; prints the counts.
set -u
WHAT=$1; BIN=$2; MODE=$3; N=${4:-4000}; SHARDS=${5:-2}
W=${OUT:-/tmp/mk-counters}/$MODE-$WHAT; rm -rf "$W"; mkdir -p "$W"
PORT=$((20000 + RANDOM % 20000))
case $MODE in
  strace) WRAP="strace -c -f -o $W/counts.txt" ;;
  perf) WRAP="perf stat -e io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work,context-switches,task-clock -o $W/counts.txt" ;;
  opcodes) WRAP="perf record -q -e io_uring:io_uring_submit_req -o $W/perf.data" ;;
  cpu) WRAP="perf record -q -F 1999 --call-graph dwarf,16384 -o $W/perf.data" ;;
  bare) WRAP="" ;;
  *) echo "mode: strace, perf, opcodes, cpu or bare" >&2; exit 2 ;;
esac
ARGS="--override listeners=PLAINTEXT://127.0.0.1:$PORT --override log.dirs=$W/data --override flush.policy=${FLUSH:-none} --override auto.create.topics.enable=false"
await_listening() { for _ in $(seq 600); do grep -q "listening on" "$1" && return 0; sleep 0.1; done; return 1; }
# The broker's pid under the wrapper (the wrapper's child), or the wrapper itself when bare.
broker_pid() { if [ -z "$WRAP" ]; then echo "$1"; else pgrep -x -P "$1" minikafka; fi; }
if [ "$WHAT" = restart ]; then
  ARGS="$ARGS --override num.shards=$SHARDS"
  "$BIN/minikafka" $ARGS >"$W/out1" 2>"$W/err1" &
  PID=$!
  await_listening "$W/out1" || { echo "no start"; kill -9 $PID; exit 1; }
  "$BIN/mk" -b 127.0.0.1:$PORT topics create t --partitions "$N" >/dev/null || { kill -9 $PID; exit 1; }
  seq 1 $((N * 3)) | sed 's/^/k/;s/$/:v/' |
    "$BIN/mk" -b 127.0.0.1:$PORT produce t --key-separator : --linger-ms 50 >/dev/null
  kill -9 $PID; wait $PID 2>/dev/null
  START=$(date +%s.%N)
  $WRAP "$BIN/minikafka" $ARGS >"$W/out2" 2>"$W/err2" &
  SPID=$!
  until "$BIN/mk" -b 127.0.0.1:$PORT topics describe t >"$W/describe" 2>/dev/null; do sleep 0.01; done
  END=$(date +%s.%N)
  echo "restart after kill -9, $N partitions, until describe answers: $(echo "$END - $START" | bc) s (under $MODE)"
  kill -9 "$(broker_pid $SPID)"; wait $SPID 2>/dev/null
elif [ "$WHAT" = produce ]; then
  RTT=${MK_RTT:-target/debug/mk-rtt}
  VALUE_BYTES=${4:-100}; SHARDS=${5:-1}
  $WRAP "$BIN/minikafka" $ARGS --override num.shards=$SHARDS >"$W/out" 2>"$W/err" &
  SPID=$!
  await_listening "$W/out" || { echo "no start"; kill $SPID; exit 1; }
  "$RTT" 127.0.0.1:$PORT "${RTT_SECONDS:-3}" "$VALUE_BYTES" rtt | tee "$W/rtt.txt" | head -2
  kill -TERM "$(broker_pid $SPID)"; wait $SPID 2>/dev/null
elif [ "$WHAT" = fetch ]; then
  RECORDS=${4:-200000}
  MPORT=$((PORT + 1))
  "$BIN/minikafka" $ARGS --override num.shards=1 --override metrics.listener=http://127.0.0.1:$MPORT >"$W/out" 2>"$W/err" &
  PID=$!
  await_listening "$W/out" || { echo "no start"; kill -9 $PID; exit 1; }
  "$BIN/mk" -b 127.0.0.1:$PORT topics create t --partitions 1 >/dev/null || { kill -9 $PID; exit 1; }
  seq 1 "$RECORDS" | awk '{ printf "%0256d\n", $1 }' |
    "$BIN/mk" -b 127.0.0.1:$PORT produce t --linger-ms 50 >/dev/null
  fetches() { curl -s "http://127.0.0.1:$MPORT/metrics" | grep '^minikafka_requests_total{api="Fetch"}' | awk '{ print $2 }'; }
  BEFORE=$(fetches)
  # The counter attaches to the running broker for the consume only (no startup, no fill).
  case $MODE in
    strace) strace -c -f -p $PID -o "$W/counts.txt" & ;;
    perf) perf stat -e io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work,context-switches,task-clock -p $PID -o "$W/counts.txt" & ;;
    opcodes) perf record -q -e io_uring:io_uring_submit_req -p $PID -o "$W/perf.data" & ;;
  esac
  CPID=$!
  sleep 1
  T0=$(date +%s.%N)
  GOT=$("$BIN/mk" -b 127.0.0.1:$PORT consume t --count "$RECORDS" --format '%o' | wc -l)
  T1=$(date +%s.%N)
  kill -INT $CPID; wait $CPID 2>/dev/null
  echo "consumed $GOT records of 256 B with $(( $(fetches) - BEFORE )) Fetch requests in $(echo "$T1 - $T0" | bc) s (plus 1 s attached before it)"
  kill -TERM $PID; wait $PID 2>/dev/null
  WRAP=counted
else
  echo "what: restart, produce or fetch" >&2; exit 2
fi
if [ "$MODE" = opcodes ]; then
  # io_uring submissions by opcode (uring backend only).
  perf script -i "$W/perf.data" 2>/dev/null | grep -o 'opcode [A-Z_]*' | sort | uniq -c | sort -rn | tee "$W/counts.txt"
elif [ "$MODE" = cpu ]; then
  # CPU samples with call stacks (a release build has line tables): the self and
  # inclusive shares by function.
  perf report -i "$W/perf.data" --no-children --percent-limit 1 --stdio -g none --sort dso,sym 2>/dev/null |
    grep -v '^$\|^#' | head -40 | tee "$W/counts.txt"
elif [ -n "$WRAP" ]; then
  grep -v '^$\|^#' "$W/counts.txt" | head -20
fi
