#!/bin/bash
# Checks that attach.sh picks the brokers its command starts, directly or through a wrapper,
# and none that another run on the machine started (their command lines look the same):
#
#   benches/scripts/attach-test.sh        # prints "ok" or what went wrong; exit status 0 or 1
#
# Stand-ins for brokers are `bash -c 'sleep N; true'` processes (`; true`: bash stays, not exec'd) whose extra arguments carry the
# scratch-directory argument attach.sh matches; `cmds` mode attaches no perf, so this needs none.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
broker_like() { bash -c "sleep $1; true" "$2" --override "log.dirs=/tmp/mk-bench-sbs-attach-test/$3"; }
# Another run's broker, not under the command.
broker_like 4 other outsider &
OUTSIDER=$!
export -f broker_like
# The command: one broker as its child, one under a wrapper process (`timeout`), then exits.
"$HERE/attach.sh" cmds "$OUT" -- bash -c \
  'broker_like 1.5 own child & timeout 10 bash -c "broker_like 1.5 own grandchild; true"; wait' \
  2>/dev/null
kill "$OUTSIDER" 2>/dev/null; wait "$OUTSIDER" 2>/dev/null
got=$(cat "$OUT"/cmd.* 2>/dev/null | grep -o 'mk-bench-sbs-attach-test/[a-z]*' | sort | tr '\n' ' ')
want="mk-bench-sbs-attach-test/child mk-bench-sbs-attach-test/grandchild "
if [ "$got" = "$want" ]; then echo ok; else echo "attach.sh attached to: '$got', want: '$want'"; exit 1; fi
