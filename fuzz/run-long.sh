#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 300), one after another, in one process on one
# core (libFuzzer's default; no -jobs/-fork) at the lowest priority (FUZZ_NICE=0 for a dedicated run), with libFuzzer's memory limits: -rss_limit_mb=512 fails a run whose memory
# grows past 512 MB, -malloc_limit_mb=256 fails any single allocation above 256 MB (an
# allocation sized by input). Needs `cargo +nightly` and `cargo install cargo-fuzz`.
#
# Usage: fuzz/run-long.sh [SECONDS] [TARGET...]   (targets default to all of `cargo fuzz list`)
# New inputs that add coverage land in fuzz/corpus/<target>/ (minimise before committing:
# `cargo +nightly fuzz cmin <target>`); a failing input lands in fuzz/artifacts/<target>/.
# Prints one summary line per target: runs, seconds, final coverage and corpus size.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-300}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
nice -n "${FUZZ_NICE:-19}" cargo +nightly fuzz build -O
mkdir -p logs
status=0
for target in "${targets[@]}"; do
    log="logs/$target.log"
    if ! nice -n "${FUZZ_NICE:-19}" cargo +nightly fuzz run -O "$target" -- \
        -max_total_time="$seconds" \
        -rss_limit_mb=512 -malloc_limit_mb=256 -max_len=65536 -print_final_stats=1 \
        >"$log" 2>&1; then
        echo "$target: FAILED (see fuzz/$log and fuzz/artifacts/$target/)"
        status=1
        continue
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    corpus=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1)
    echo "$target: ${runs:-?} runs in ${seconds}s, ${cov:-cov: ?}, ${corpus:-corp: ?}"
done
exit $status
