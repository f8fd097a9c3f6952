#!/bin/bash
# A broker's memory over time, to tell a run's phases apart (e.g. the consume run's fill from
# its consume: the harness's producer and consumer are separate connections, so the socket
# count changes between them):
#
#   benches/scripts/rss-series.sh OUT -- mk-bench side-by-side --only consume --reps 1 ...
#
# Every 50 ms, for each process the command started directly (the brokers mk-bench runs, fio),
# appends "ms-since-start VmRSS-kB VmHWM-kB sockets" to OUT/series.PID; OUT/cmd.PID names it.
# rss-peak.sh keeps the smaps at the peak instead.
set -u
OUT=$1; shift; [ "$1" = "--" ] && shift
mkdir -p "$OUT"
"$@" &
RUN=$!
T0=$(date +%s%3N)
while kill -0 $RUN 2>/dev/null; do
  for p in $(pgrep -P $RUN); do
    s=$(awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{print r, h}' /proc/$p/status 2>/dev/null)
    [ -n "$s" ] || continue
    n=$(ls -l /proc/$p/fd 2>/dev/null | grep -c socket)
    [ -e "$OUT/cmd.$p" ] || tr '\0' ' ' </proc/$p/cmdline >"$OUT/cmd.$p" 2>/dev/null
    echo "$(( $(date +%s%3N) - T0 )) $s $n" >>"$OUT/series.$p"
  done
  sleep 0.05
done
wait $RUN
