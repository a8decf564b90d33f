"""LanceDB, the peer: what a user picks for hybrid search over files on object storage. Over the
same rows and query vectors as hubdex: LanceDB's native full-text index over title + body, an
IVF_HNSW_SQ cosine index over the same vectors, hybrid search with its RRF reranker, top 10.
Prints one JSON object.

usage: lance.py build STORE_DIR QUERY_VECTORS_JSON WORK_DIR [MAX_QUERIES]
       lance.py serve WORK_DIR QUERY_VECTORS_JSON [MAX_QUERIES]   (a fresh process: cold open,
                                                                   latency per mode, RSS)
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def pct(ms):
    ms = sorted(ms)
    p = lambda q: ms[round((len(ms) - 1) * q)]
    return {"p50_ms": p(0.5), "p95_ms": p(0.95), "p99_ms": p(0.99), "n": len(ms)}


def rss_kib():
    out = {}
    for line in open("/proc/self/status"):
        for key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            if line.startswith(key + ":"):
                out[key] = int(line.split()[1])
    return out


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def float_vectors(emb):
    """rows.parquet's vectors as the float32 unit vectors LanceDB indexes: format 8 keeps i8
    (the unit vector scaled to 127), formats 1-7 float32; the same direction either way."""
    v = emb.values.to_numpy(zero_copy_only=False).reshape(-1, emb.type.list_size).astype(np.float32)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1), pa.float32()), emb.type.list_size)


def load_queries(path, limit):
    qs = json.load(open(path))
    return qs[:limit] if limit else qs


def build(store, vectors_file, work, limit):
    import lancedb
    from lancedb.index import FTS, IvfHnswSq

    latest = json.load(open(os.path.join(store, "LATEST")))
    manifest = json.load(open(os.path.join(store, "snapshots", latest["snapshot"], "manifest.json")))
    t0 = time.perf_counter()
    tables = []
    for seg in manifest["segments"]:
        t = pq.read_table(os.path.join(store, "segments", seg["id"], "rows.parquet"),
                          columns=["id", "title", "body", "embedding"])
        titles = [x or "" for x in t.column("title").to_pylist()]
        text = pa.array([a + "\n" + b for a, b in zip(titles, t.column("body").to_pylist())])
        tables.append(pa.table({"id": t.column("id"), "text": text,
                                "vector": float_vectors(t.column("embedding").combine_chunks())}))
    data = pa.concat_tables(tables)
    read_s = time.perf_counter() - t0
    rows = data.num_rows

    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.perf_counter()
    db = lancedb.connect(work)
    tbl = db.create_table("rows", data=data, mode="overwrite")
    # Native FTS (stemmed, stop words removed, as hubdex's prose analyzer).
    tbl.create_index("text", config=FTS(), replace=True)
    tbl.create_index("vector", config=IvfHnswSq(distance_type="cosine"), replace=True)
    build_s = time.perf_counter() - t0
    size = dir_bytes(work)

    # Serving figures come from a fresh process that only opens the table and queries.
    out = subprocess.run([sys.executable, __file__, "serve", work, vectors_file, str(limit or 0)],
                         check=True, capture_output=True, text=True)
    served = json.loads(out.stdout)
    print(json.dumps({
        "rows": rows,
        "read_seconds": read_s,
        "build_seconds": build_s,
        "build_rows_per_s": rows / build_s,
        "bytes": size,
        "bytes_per_row": size / rows,
        **served,
    }))


def serve(work, vectors_file, limit):
    process_start = time.perf_counter()
    import lancedb
    from lancedb.rerankers import RRFReranker

    queries = load_queries(vectors_file, limit)
    text0, vec0 = queries[0]["query"], queries[0]["vector"]
    t0 = time.perf_counter()
    db = lancedb.connect(work)
    tbl = db.open_table("rows")
    reranker = RRFReranker()

    def hybrid(text, vec):
        return (tbl.search(query_type="hybrid").vector(vec).text(text).rerank(reranker)
                .limit(10).select(["id"]).to_list())

    def sparse(text, vec):
        return tbl.search(text, query_type="fts").limit(10).select(["id"]).to_list()

    def dense(text, vec):
        return (tbl.search(vec, query_type="vector").distance_type("cosine").limit(10)
                .select(["id"]).to_list())

    hybrid(text0, vec0)
    cold_open_s = time.perf_counter() - t0
    modes = {}
    for name, fn in (("sparse_only", sparse), ("dense_only", dense), ("rrf", hybrid)):
        ms = []
        for q in queries:
            t = time.perf_counter()
            fn(q["query"], q["vector"])
            ms.append((time.perf_counter() - t) * 1000)
        modes[name] = {"search": pct(ms)}
    print(json.dumps({
        "cold_open_seconds": cold_open_s,
        "import_seconds": t0 - process_start,
        "modes": modes,
        "rss_kib": rss_kib(),
    }))


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 0)
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        sys.exit(__doc__)
