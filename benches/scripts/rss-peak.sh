#!/bin/bash
# Where a broker's peak memory goes: keep a copy of /proc/<pid>/smaps taken when its VmRSS was
# highest, for every broker an mk-bench run starts, and print the breakdown by mapping.
#
#   benches/scripts/rss-peak.sh OUT -- mk-bench side-by-side --only saturation ...
#
# Samples every 100 ms (a peak shorter than that can be missed: VmHWM in the run's own table
# is exact). OUT/smaps.PID, OUT/rss.PID (kB) and OUT/cmd.PID per broker.
set -u
OUT=$1; shift; [ "$1" = "--" ] && shift
mkdir -p "$OUT"
"$@" &
RUN=$!
declare -A best
while kill -0 $RUN 2>/dev/null; do
  # `[m]k-bench-…` so this loop's own pgrep never matches itself.
  for p in $(pgrep -f -- '--override log.dirs=/[^ ]*[m]k-bench-(sbs|scale)-|-data-dir /[^ ]*[m]k-bench-(sbs|scale)-'); do
    r=$(awk '/^VmRSS:/{print $2}' /proc/$p/status 2>/dev/null)
    [ -n "$r" ] || continue
    if [ "${best[$p]:-0}" -lt "$r" ]; then
      best[$p]=$r
      cat /proc/$p/smaps >"$OUT/smaps.$p.tmp" 2>/dev/null && mv "$OUT/smaps.$p.tmp" "$OUT/smaps.$p"
      tr '\0' ' ' </proc/$p/cmdline >"$OUT/cmd.$p" 2>/dev/null
      echo "$r" >"$OUT/rss.$p"
    fi
  done
  sleep 0.1
done
wait $RUN
RC=$?
for f in "$OUT"/rss.*; do
  [ -e "$f" ] || continue
  p=${f##*.}
  echo "== $(cut -c1-100 "$OUT/cmd.$p"): peak VmRSS $(cat "$f") kB"
  awk '/^[0-9a-f]+-[0-9a-f]+ /{name=$6; if (name == "") name = "[anon]"}
       /^Rss:/{rss[name] += $2} /^Anonymous:/{anon[name] += $2}
       END {for (n in rss) if (rss[n] > 200) printf "%9d kB rss %9d kB anonymous  %s\n", rss[n], anon[n], n}' \
    "$OUT/smaps.$p" | sort -rn | head -6
done
exit $RC
