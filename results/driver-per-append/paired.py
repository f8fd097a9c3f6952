import json, sys, statistics as st
# usage: paired.py RUNS.jsonl [RUNS.jsonl ...] -- prints ours/peer per metric: medians, paired ratio median (min-max)
for path in sys.argv[1:]:
    rows=[json.loads(l) for l in open(path)]
    by={}
    for r in rows:
        for m in r["metrics"]:
            by.setdefault((r["workload"],r["flush"],m["name"]),{}).setdefault(r["rep"],{})[r["side"]]=m["value"]
    loads=[r["load_avg_1m"] for r in rows]
    print(f"{path}: load 1m {min(loads):.1f}-{max(loads):.1f}")
    for (w,f,name),reps in by.items():
        pairs=[(v["ours"],v["peer"]) for v in reps.values() if "ours" in v and "peer" in v]
        ours=[a for a,b in pairs]; peer=[b for a,b in pairs]
        ratios=[a/b for a,b in pairs if b]
        print(f"  {w:12s} {f:5s} {name:24s} ours {st.median(ours):10.4g}  peer {st.median(peer):10.4g}  ratio of medians {st.median(ours)/st.median(peer):.2f}  paired {st.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}, n={len(ratios)})")
