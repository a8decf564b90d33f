"""Prints ci/bench's figures and ratios (or one JSON object): hubdex beside the seeds' stack
(SQLite FTS5 + numpy) and beside LanceDB, with the targets of the serving-layout issue reported
as met or missed. Arguments: the JSON outputs of the steps, in ci/bench's order."""
import json
import platform
import sys

as_json, rows, base_build = sys.argv[1] == "1", int(sys.argv[2]), sys.argv[3]
rss_parts = [int(x) for x in sys.argv[4].split(",") if x] + [0, 0, 0]
server_rss = {"total_kib": rss_parts[0], "anon_kib": rss_parts[1], "file_kib": rss_parts[2]}
(prepare, search, mcp, load, baseline, embed, ort, prepare_small, search_small, rest1,
 lance, small_host, embedder_glibc, embedder_fixed) = (json.loads(a) for a in sys.argv[5:19])

h, b, l = search["modes"], baseline["modes"], lance["modes"]
hs = search_small["modes"]
ratio = lambda base, ours: base / ours if ours else float("inf")
p50 = lambda m: m["p50_ms"]
rrf_embed = h["rrf"]["with_embedding"]
mib = lambda kib: kib / 1024
served_gap = p50(rest1["latency"]) - p50(rrf_embed)
targets = [
    ("server RSS after the whole bench <= 400 MiB", mib(server_rss["total_kib"]) <= 400,
     f'{mib(server_rss["total_kib"]):.0f} MiB (anon {mib(server_rss["anon_kib"]):.0f}, file-backed {mib(server_rss["file_kib"]):.0f})'),
    ("cold open from the cache <= 0.3 s", search["cold_open_seconds"] <= 0.3, f'{search["cold_open_seconds"]:.3f} s'),
    ("rrf p50 <= 5 ms in process (search alone)", p50(h["rrf"]["search"]) <= 5, f'{p50(h["rrf"]["search"]):.2f} ms'),
    ("rrf p99 <= 15 ms in process (search alone)", h["rrf"]["search"]["p99_ms"] <= 15, f'{h["rrf"]["search"]["p99_ms"]:.2f} ms'),
    ("rrf p50 <= 5 ms with the query embedding", p50(rrf_embed) <= 5, f'{p50(rrf_embed):.2f} ms'),
    ("rrf p99 <= 15 ms with the query embedding", rrf_embed["p99_ms"] <= 15, f'{rrf_embed["p99_ms"]:.2f} ms'),
    (f"small repositories ({prepare_small['segments']} x {rows // max(prepare_small['segments'], 1)} rows): rrf p50 within 1.3x of {prepare['segments']} segments",
     p50(hs["rrf"]["search"]) <= 1.3 * p50(h["rrf"]["search"]),
     f'{p50(hs["rrf"]["search"]):.2f} ms vs {p50(h["rrf"]["search"]):.2f} ms ({p50(hs["rrf"]["search"]) / p50(h["rrf"]["search"]):.2f}x), '
     f'{prepare_small["serving_units"]} serving units'),
    ("fetch of 10 ids p50 <= 1 ms", search["fetch_10_ids"] is not None and p50(search["fetch_10_ids"]) <= 1,
     f'{p50(search["fetch_10_ids"]):.3f} ms' if search["fetch_10_ids"] else "not measured"),
    ("scan, 7-day window, one filter, p50 <= 5 ms",
     search["scan_7d_one_filter"] is not None and p50(search["scan_7d_one_filter"]) <= 5,
     f'{p50(search["scan_7d_one_filter"]):.3f} ms' if search["scan_7d_one_filter"] else "not measured"),
    ("related, depth 1, by row id, p50 <= 2 ms",
     search.get("related_depth1") is not None and p50(search["related_depth1"]["latency"]) <= 2,
     f'{p50(search["related_depth1"]["latency"]):.3f} ms ({search["related_depth1"]["edges_listed_per_call"]:.1f} edges listed per call, '
     f'{prepare.get("edges", 0)} edges in the corpus)' if search.get("related_depth1") else "not measured"),
    ("scoped rrf search (every other repository) p50 within 1.1x of unscoped",
     search.get("scoped_rrf") is not None and search["scoped_rrf"]["every_other_repository"]["p50_ratio"] <= 1.1,
     (lambda x, y: f'{p50(x["scoped"]):.2f} ms vs {p50(x["unscoped"]):.2f} ms ({x["p50_ratio"]:.2f}x, {x["repositories"]} repositories; '
      f'{p50(x["scoped_whole_index_statistics"]):.2f} ms with whole-index BM25 statistics: {x["scope_statistics_p50_ratio"]:.2f}x for scoped ones); '
      f'one repository: {y["p50_ratio"]:.2f}x')(search["scoped_rrf"]["every_other_repository"], search["scoped_rrf"]["one_repository_glob"])
     if search.get("scoped_rrf") else "not measured"),
    ("one REST rrf request p50 within 1.5 ms of in-process search + embedding", served_gap <= 1.5,
     f'{p50(rest1["latency"]):.2f} ms vs {p50(rrf_embed):.2f} ms (+{served_gap:.2f} ms)'),
    ("8 concurrent HTTP clients >= 4x the QPS before (62 at 100k, 58 at 1M), 0 errors",
     load["qps"] >= 4 * (58 if rows >= 1000000 else 62) and load["errors"] == 0,
     f'{load["qps"]:.1f} QPS, {load["errors"]} errors'),
    ("non-embedding build >= LanceDB's rows/s", prepare["write_rows_per_s"] >= lance["build_rows_per_s"],
     f'{prepare["write_rows_per_s"]:.0f} vs {lance["build_rows_per_s"]:.0f} rows/s'),
]
# Against the peer: hubdex ahead on every figure.
peer = [
    ("build rows/s", prepare["write_rows_per_s"], lance["build_rows_per_s"], True),
    ("bytes per row", prepare["bytes_per_row"], lance["bytes_per_row"], False),
    ("cold open + first query (s)", search["cold_open_seconds"], lance["cold_open_seconds"], False),
]
for m in ("sparse_only", "dense_only", "rrf"):
    for q in ("p50_ms", "p95_ms", "p99_ms"):
        peer.append((f"{m} {q[:3]} (ms)", h[m]["search"][q], l[m]["search"][q], False))
peer.append(("serving RSS (MiB)", mib(server_rss["total_kib"]), mib(lance["rss_kib"].get("VmRSS", 0)), False))
peer_rows = [{"figure": f, "hubdex": ours, "lancedb": theirs,
              "ahead": (ours >= theirs) if higher_better else (ours <= theirs)}
             for f, ours, theirs, higher_better in peer]

result = {
    "rows": rows, "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
    "corpus": {k: prepare[k] for k in ("base_rows", "real_vectors", "synthesized_vectors", "segments", "serving_units")},
    "build": {"write_rows_per_s": prepare["write_rows_per_s"], "bytes_per_row": prepare["bytes_per_row"],
              "merge_seconds": prepare["merge_seconds"],
              "base_build_line": base_build, "baseline_build_rows_per_s": baseline["build_rows_per_s"]},
    "small_repositories": {"prepare": prepare_small, "rrf": hs["rrf"]["search"]},
    "open": {"first_open_s": search["first_open_seconds"], "cold_open_s": search["cold_open_seconds"]},
    "search_in_process": {m: {"hubdex": h[m]["search"], "hubdex_with_embedding": h[m]["with_embedding"],
                              "baseline": b[m]["search"], "lancedb": l[m]["search"],
                              "ratio_p50": ratio(b[m]["search"]["p50_ms"], h[m]["search"]["p50_ms"])}
                          for m in ("sparse_only", "dense_only", "rrf")},
    "fetch_10_ids": search["fetch_10_ids"], "scan_7d_one_filter": search["scan_7d_one_filter"],
    "related_depth1": search.get("related_depth1"), "scoped_rrf": search.get("scoped_rrf"), "edge_summary_per_result": search.get("edge_summary_per_result"),
    "query_embedding": search["query_embedding"],
    "qps_8_threads_in_process": {"hubdex": search["qps_rrf_8_threads"], "baseline": baseline["qps_rrf_8_threads"],
                                 "ratio": search["qps_rrf_8_threads"] / max(baseline["qps_rrf_8_threads"], 1e-9)},
    "mcp_http": mcp, "rest_1_client": rest1, "http_8_clients": load,
    "rss_kib": {"server": server_rss, "hubdex_bench_process": search["rss_split_after_run"],
                "baseline": baseline["max_rss_kib"], "lancedb_serving": lance["rss_kib"]},
    "lancedb": lance, "versus_lancedb": peer_rows,
    "embedding": {"hubdex": embed, "onnxruntime_python": ort, "ratio": embed["chunks_per_s"] / ort["chunks_per_s"]},
    "targets": [{"target": t, "met": m, "figure": f} for t, m, f in targets],
    "small_host": small_host,
    "query_embedder_memory": {"glibc_defaults": embedder_glibc, "thresholds_fixed": embedder_fixed},
}
if as_json:
    print(json.dumps(result, indent=2))
    sys.exit(0)

c = result["corpus"]
print(f"== ci/bench --rows {rows}  ({result['machine']})")
print(f"corpus: {c['base_rows']} real rows grown to {rows} in {c['segments']} segments ({c['serving_units']} serving units); "
      f"{c['real_vectors']} real vectors, {c['synthesized_vectors']} synthesised (perturbed real ones)")
print(f"build, non-embedding (write parquet + serving index + usearch, merge, upload, publish): {prepare['write_rows_per_s']:.0f} rows/s"
      f"   baseline FTS5+numpy load: {baseline['build_rows_per_s']:.0f} rows/s   LanceDB: {lance['build_rows_per_s']:.0f} rows/s")
print(f"base corpus build (real, with embedding): {base_build}")
print(f"store: {prepare['bytes_per_row']:.0f} bytes/row (build segments {prepare.get('build_segment_bytes_per_row', 0):.0f}, merged {prepare.get('merged_bytes_per_row', 0):.0f})   LanceDB: {lance['bytes_per_row']:.0f} bytes/row")
print(f"open: first (fetch + verify + open) {search['first_open_seconds']:.2f} s, cold open from the local cache {search['cold_open_seconds']:.3f} s"
      f"   LanceDB cold open + first hybrid query {lance['cold_open_seconds']:.3f} s")
one = prepare_small.get("one_repo_change") or {}
if one:
    print(f"small repositories: {prepare_small['segments']} repositories -> {prepare_small['serving_units']} serving units; "
          f"merging took {prepare_small['merge_seconds']:.1f} s; a one-repository change rewrites one merged segment "
          f"of {one['merged_rows']} rows ({one['members']} repositories) in {one['seconds']:.1f} s")
print()
print(f"{'search, in process (ms)':28s} {'p50':>8s} {'p95':>8s} {'p99':>8s} | {'FTS5+np p50':>11s} | {'LanceDB p50':>11s} {'p95':>8s} {'p99':>8s}")
for m in ("sparse_only", "dense_only", "rrf"):
    x, y, z = h[m]["search"], b[m]["search"], l[m]["search"]
    print(f"{m:28s} {x['p50_ms']:8.2f} {x['p95_ms']:8.2f} {x['p99_ms']:8.2f} | {y['p50_ms']:11.2f} | {z['p50_ms']:11.2f} {z['p95_ms']:8.2f} {z['p99_ms']:8.2f}")
for m in ("dense_only", "rrf"):
    x = h[m]["with_embedding"]
    print(f"{m + ' + query embedding':28s} {x['p50_ms']:8.2f} {x['p95_ms']:8.2f} {x['p99_ms']:8.2f}")
for q in h["sparse_only"].get("slowest", [])[:3]:
    print(f"  slow sparse_only: {q['ms']:7.2f} ms  {len(q['query'].split()):3d} words  {q['query'][:70]!r}")
x = hs["rrf"]["search"]
print(f"{'rrf, small repositories':28s} {x['p50_ms']:8.2f} {x['p95_ms']:8.2f} {x['p99_ms']:8.2f}")
for name, key in (("fetch, 10 ids", "fetch_10_ids"), ("scan, 7 days, one filter", "scan_7d_one_filter"),
                  ("edge summary, per result", "edge_summary_per_result")):
    x = search.get(key)
    if x:
        print(f"{name:28s} {x['p50_ms']:8.3f} {x['p95_ms']:8.3f} {x['p99_ms']:8.3f}")
if search.get("related_depth1"):
    x = search["related_depth1"]["latency"]
    print(f"{'related, depth 1, by row id':28s} {x['p50_ms']:8.3f} {x['p95_ms']:8.3f} {x['p99_ms']:8.3f}")
q = result["qps_8_threads_in_process"]
print(f"QPS, rrf, 8 threads in process: hubdex {q['hubdex']:.0f}, baseline {q['baseline']:.0f} ({q['ratio']:.1f}x)")
print()
print("MCP over HTTP (official Python client, includes query embedding):")
for m, v in mcp.items():
    print(f"  {m:12s} p50 {v['p50_ms']:7.2f}  p95 {v['p95_ms']:7.2f}  p99 {v['p99_ms']:7.2f} ms")
print(f"REST, 1 client (rrf, with embedding): p50 {rest1['latency']['p50_ms']:.2f} ms, p99 {rest1['latency']['p99_ms']:.2f} ms")
print(f"HTTP, 8 concurrent clients (rrf, with embedding): {load['qps']:.1f} QPS, p50 {load['latency']['p50_ms']:.1f} ms, "
      f"p99 {load['latency']['p99_ms']:.1f} ms, {load['errors']} errors")
r = result["rss_kib"]
print(f"RSS: server {mib(server_rss['total_kib']):.0f} MiB after the run (anon {mib(server_rss['anon_kib']):.0f}, "
      f"file-backed {mib(server_rss['file_kib']):.0f}); LanceDB serving process {mib(lance['rss_kib'].get('VmRSS', 0)):.0f} MiB "
      f"(anon {mib(lance['rss_kib'].get('RssAnon', 0)):.0f}); baseline process {mib(r['baseline']):.0f} MiB")
e = result["embedding"]
print(f"embedding {embed['texts']} texts, batch 32: hubdex {embed['chunks_per_s']:.1f} chunks/s, raw onnxruntime "
      f"{ort['chunks_per_s']:.1f} chunks/s ({e['ratio']:.2f}x); peak RSS of that process {embed.get('peak_rss_kib', 0) / 1024:.0f} MiB")
print()
print("against LanceDB (hubdex ahead?):")
for p in peer_rows:
    print(f"  {'ahead ' if p['ahead'] else 'BEHIND'} {p['figure']:28s} hubdex {p['hubdex']:10.2f}   LanceDB {p['lancedb']:10.2f}")
print()
print("targets (reported, not asserted):")
for t in result["targets"]:
    print(f"  {'met   ' if t['met'] else 'MISSED'} {t['target']}: {t['figure']}")
print()
if "skipped" in small_host:
    print(f"small host: skipped ({small_host['skipped']})")
else:
    print("small host: the server in a memory cgroup, store pages evicted first, REST search with embedding")
    print(f"  {'limit':>6s} {'start s':>8s} | {'1 client p50':>12s} {'p99':>7s} {'QPS':>5s} | {'8 clients p50':>13s} {'p99':>7s} {'QPS':>5s} | "
          f"{'errors':>6s} {'maj.faults':>10s} {'peak MiB':>8s} {'anon MiB':>8s} {'OOM':>3s}")
    for r in small_host["rows"]:
        if not r.get("start_seconds"):
            print(f"  {r['limit_mib']:>6s} did not start: exit {r.get('exit')}, {r.get('oom_kills')} OOM kill(s), peak {r['peak_mib']:.0f} MiB")
            continue
        c1, c8 = r.get("clients_1", {}), r.get("clients_8", {})
        errors = c1.get("errors", 0) + c8.get("errors", 0)
        print(f"  {r['limit_mib']:>6s} {r['start_seconds']:8.2f} | {c1.get('p50_ms', float('nan')):12.1f} {c1.get('p99_ms', float('nan')):7.1f} "
              f"{c1.get('qps', 0):5.0f} | {c8.get('p50_ms', float('nan')):13.1f} {c8.get('p99_ms', float('nan')):7.1f} {c8.get('qps', 0):5.0f} | "
              f"{errors:6d} {r.get('major_faults', 0):10d} {r['peak_mib']:8.0f} {r.get('anon_mib', 0):8.0f} {r.get('oom_kills', 0):3d}")
print()
print("query embedder (one session, 200 queries one at a time): anonymous memory, as glibc leaves it / thresholds fixed as hubdex runs")
for name, e in (("glibc defaults", embedder_glibc), ("MALLOC_TRIM_THRESHOLD_=131072", embedder_fixed)):
    print(f"  {name:>30s}: {e['embedder_anon_mib']:6.1f} MiB, p50 {e['latency']['p50_ms']:.2f} ms, p99 {e['latency']['p99_ms']:.2f} ms, "
          f"vectors equal to the indexer's {e['vectors_equal_to_indexer']}/{e['queries']}")
