"""Prints ci/bench's figures and ratios (or one JSON object), with the targets of issue 7
reported as met or missed. Arguments: the JSON outputs of the steps, in ci/bench's order."""
import json
import platform
import sys

as_json, rows, base_build, server_rss = sys.argv[1] == "1", int(sys.argv[2]), sys.argv[3], int(sys.argv[4] or 0)
prepare, search, mcp, load, baseline, embed, ort = (json.loads(a) for a in sys.argv[5:12])

h, b = search["modes"], baseline["modes"]
ratio = lambda base, ours: base / ours if ours else float("inf")
targets = [
    ("rrf p50 in process <= 10 ms", h["rrf"]["search"]["p50_ms"] <= 10, f'{h["rrf"]["search"]["p50_ms"]:.2f} ms'),
    ("rrf p99 in process <= 30 ms", h["rrf"]["search"]["p99_ms"] <= 30, f'{h["rrf"]["search"]["p99_ms"]:.2f} ms'),
    (">= 20x faster than the baseline's hybrid (p50)",
     ratio(b["rrf"]["search"]["p50_ms"], h["rrf"]["search"]["p50_ms"]) >= 20,
     f'{ratio(b["rrf"]["search"]["p50_ms"], h["rrf"]["search"]["p50_ms"]):.1f}x'),
    ("cold open <= 1 s", search["cold_open_seconds"] <= 1, f'{search["cold_open_seconds"]:.2f} s'),
    ("non-embedding build >= 20k rows/s", prepare["write_rows_per_s"] >= 20000, f'{prepare["write_rows_per_s"]:.0f} rows/s'),
    ("embedding >= 1.0x raw onnxruntime", embed["chunks_per_s"] >= ort["chunks_per_s"],
     f'{embed["chunks_per_s"] / ort["chunks_per_s"]:.2f}x'),
]
result = {
    "rows": rows, "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
    "corpus": {k: prepare[k] for k in ("base_rows", "real_vectors", "synthesized_vectors", "segments")},
    "build": {"write_rows_per_s": prepare["write_rows_per_s"], "bytes_per_row": prepare["bytes_per_row"],
              "base_build_line": base_build, "baseline_build_rows_per_s": baseline["build_rows_per_s"]},
    "open": {"first_open_s": search["first_open_seconds"], "cold_open_s": search["cold_open_seconds"]},
    "search_in_process": {m: {"hubdex": h[m]["search"], "hubdex_with_embedding": h[m]["with_embedding"],
                              "baseline": b[m]["search"],
                              "ratio_p50": ratio(b[m]["search"]["p50_ms"], h[m]["search"]["p50_ms"])}
                          for m in ("sparse_only", "dense_only", "rrf")},
    "query_embedding": search["query_embedding"],
    "qps_8_threads_in_process": {"hubdex": search["qps_rrf_8_threads"], "baseline": baseline["qps_rrf_8_threads"],
                                 "ratio": search["qps_rrf_8_threads"] / max(baseline["qps_rrf_8_threads"], 1e-9)},
    "mcp_http": mcp, "http_8_clients": load,
    "rss_kib": {"server": server_rss, "hubdex_bench_process": search["rss_after_run_kib"], "baseline": baseline["max_rss_kib"]},
    "embedding": {"hubdex": embed, "onnxruntime_python": ort, "ratio": embed["chunks_per_s"] / ort["chunks_per_s"]},
    "targets": [{"target": t, "met": m, "figure": f} for t, m, f in targets],
}
if as_json:
    print(json.dumps(result, indent=2))
    sys.exit(0)

c = result["corpus"]
print(f"== ci/bench --rows {rows}  ({result['machine']})")
print(f"corpus: {c['base_rows']} real rows grown to {rows} in {c['segments']} segments; "
      f"{c['real_vectors']} real vectors, {c['synthesized_vectors']} synthesised (perturbed real ones)")
print(f"build, non-embedding (write parquet + tantivy + usearch, upload, publish): {prepare['write_rows_per_s']:.0f} rows/s"
      f"   baseline FTS5+numpy load: {baseline['build_rows_per_s']:.0f} rows/s")
print(f"base corpus build (real, with embedding): {base_build}")
print(f"snapshot: {prepare['bytes_per_row']:.0f} bytes/row")
print(f"open: first (fetch + verify + open) {search['first_open_seconds']:.2f} s, cold open from the local cache {search['cold_open_seconds']:.2f} s")
print()
print(f"{'search, in process (ms)':28s} {'p50':>8s} {'p95':>8s} {'p99':>8s} | {'baseline p50':>12s} {'p95':>8s} {'p99':>8s} | {'ratio p50':>9s}")
for m in ("sparse_only", "dense_only", "rrf"):
    x, y = h[m]["search"], b[m]["search"]
    print(f"{m:28s} {x['p50_ms']:8.2f} {x['p95_ms']:8.2f} {x['p99_ms']:8.2f} | {y['p50_ms']:12.2f} {y['p95_ms']:8.2f} {y['p99_ms']:8.2f} | {y['p50_ms'] / x['p50_ms']:8.1f}x")
for m in ("dense_only", "rrf"):
    x = h[m]["with_embedding"]
    print(f"{m + ' + query embedding':28s} {x['p50_ms']:8.2f} {x['p95_ms']:8.2f} {x['p99_ms']:8.2f}")
q = result["qps_8_threads_in_process"]
print(f"QPS, rrf, 8 threads in process: hubdex {q['hubdex']:.0f}, baseline {q['baseline']:.0f} ({q['ratio']:.1f}x)")
print()
print("MCP over HTTP (official Python client, includes query embedding):")
for m, v in mcp.items():
    print(f"  {m:12s} p50 {v['p50_ms']:7.2f}  p95 {v['p95_ms']:7.2f}  p99 {v['p99_ms']:7.2f} ms")
print(f"HTTP, 8 concurrent clients (rrf, with embedding): {load['qps']:.1f} QPS, p50 {load['latency']['p50_ms']:.1f} ms, "
      f"p99 {load['latency']['p99_ms']:.1f} ms, {load['errors']} errors")
r = result["rss_kib"]
print(f"RSS: server {r['server'] / 1024:.0f} MiB after the run; baseline process {r['baseline'] / 1024:.0f} MiB")
e = result["embedding"]
print(f"embedding {embed['texts']} texts, batch 32: hubdex {embed['chunks_per_s']:.1f} chunks/s, raw onnxruntime "
      f"{ort['chunks_per_s']:.1f} chunks/s ({e['ratio']:.2f}x)")
print()
print("targets (reported, not asserted):")
for t in result["targets"]:
    print(f"  {'met   ' if t['met'] else 'MISSED'} {t['target']}: {t['figure']}")
