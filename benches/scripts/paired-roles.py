#!/usr/bin/env python3
"""One build against another, both roles, pooled.

    benches/scripts/paired-roles.py NEW_AS_OURS/side_by_side_runs.jsonl NEW_AS_PEER/side_by_side_runs.jsonl

The two files are `mk-bench side-by-side --peer benches/scripts/minikafka-peer-runner` runs
with the builds' roles swapped (MINIKAFKA_PEER_BIN = the other build). For each workload,
durability and metric, every repetition gives one new ÷ base ratio (ours ÷ peer in the first
run, peer ÷ ours in the second), so a bias of either role (start order, port, data directory)
cancels. Prints a Markdown table: pooled median and range, and each role's median.
"""
import json
import statistics
import sys


def by_rep(path):
    """{(workload, durable, metric): {rep: {side: value}}} of one runs file."""
    out = {}
    with open(path) as f:
        for line in f:
            run = json.loads(line)
            for m in run["metrics"]:
                key = (run["workload"], run["durable"], m["name"])
                out.setdefault(key, {}).setdefault(run["rep"], {})[run["side"]] = m["value"]
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    new_ours, new_peer = by_rep(sys.argv[1]), by_rep(sys.argv[2])
    print("| workload | flush | metric | new ÷ base, pooled median | range | new as ours | new as peer | n |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    for key, reps in new_ours.items():
        a = [v["ours"] / v["peer"] for v in reps.values() if v.get("peer") and "ours" in v]
        b = [v["peer"] / v["ours"] for v in new_peer.get(key, {}).values() if v.get("ours") and "peer" in v]
        pooled = sorted(a + b)
        if not a or not b:
            continue
        workload, durable, metric = key
        print(f"| {workload} | {'durable' if durable else 'none'} | {metric} | "
              f"{statistics.median(pooled):.2f} | {pooled[0]:.2f}–{pooled[-1]:.2f} | "
              f"{statistics.median(a):.2f} | {statistics.median(b):.2f} | {len(pooled)} |")


if __name__ == "__main__":
    main()
