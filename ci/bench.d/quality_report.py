"""Prints one eval set's table for ci/bench-quality: hubdex's modes (`hubdex eval --json`) and
the seeds' stack (`seeds.py --json`) on the same corpus, the issue's targets when given, and a
line for every metric where the default (`rrf`) is below a single mode.

usage: quality_report.py HUBDEX_JSON SEEDS_JSON [--target recall=0.90,mrr=0.72]
"""
import json
import sys

hubdex = json.load(open(sys.argv[1]))
seeds = json.load(open(sys.argv[2]))
targets = {}
if len(sys.argv) > 4 and sys.argv[3] == "--target":
    targets = {k: float(v) for k, v in (kv.split("=") for kv in sys.argv[4].split(","))}

print(f"{'mode':<18} {'recall@10':>10} {'MRR@10':>8} {'nDCG@10':>8} {'p50 ms':>8} {'p95 ms':>8}")
modes = {m["mode"]: m for m in hubdex["modes"]}
for m in hubdex["modes"]:
    print(f"{m['mode']:<18} {m['recall_at_k']:>10.3f} {m['mrr_at_k']:>8.3f} {m['ndcg_at_10']:>8.3f} "
          f"{m['p50_ms']:>8.1f} {m['p95_ms']:>8.1f}")
for m in seeds["modes"]:
    print(f"{m['mode']:<18} {m['recall_at_k']:>10.3f} {m['mrr_at_k']:>8.3f} {m['ndcg_at_10']:>8.3f} "
          f"{'':>8} {'':>8}")

default = modes["rrf"]
for single in ("sparse_only", "dense_only"):
    for metric, name in (("recall_at_k", "recall@10"), ("mrr_at_k", "MRR@10"), ("ndcg_at_10", "nDCG@10")):
        if default[metric] < modes[single][metric]:
            print(f"  LOSES: the default's {name} {default[metric]:.3f} is below {single}'s "
                  f"{modes[single][metric]:.3f}")
best_seed = max(seeds["modes"], key=lambda m: m["mrr_at_k"])
print(f"  against the seeds' best ({best_seed['mode']}): recall@10 "
      f"{default['recall_at_k'] - best_seed['recall_at_k']:+.3f}, MRR@10 "
      f"{default['mrr_at_k'] - best_seed['mrr_at_k']:+.3f}")
for key, metric, name in (("recall", "recall_at_k", "recall@10"), ("mrr", "mrr_at_k", "MRR@10")):
    if key in targets:
        got = default[metric]
        print(f"  target {name} >= {targets[key]:.2f}: {got:.3f} "
              f"{'met' if got >= targets[key] else 'missed'}")
# Per query: where the default finds nothing in the top 10 and a single mode does.
lost = [i for i, (d, s, v) in enumerate(zip(default["first_hit"], modes["sparse_only"]["first_hit"],
                                              modes["dense_only"]["first_hit"]))
        if d is None and (s is not None or v is not None)]
if lost:
    print(f"  queries a single mode finds and the default misses: {len(lost)} (lines {', '.join(str(i + 1) for i in lost)})")
