"""The seeds' stack over the same rows and query vectors as hubdex: SQLite FTS5 (BM25) for
sparse, numpy exact cosine for dense, RRF k=60. Prints one JSON object.

usage: baseline.py STORE_DIR QUERY_VECTORS_JSON QPS_SECONDS [MAX_QUERIES]
"""
import json
import os
import re
import resource
import sqlite3
import sys
import threading
import time

import numpy as np
import pyarrow.parquet as pq

store, vectors_file, qps_seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
latest = json.load(open(os.path.join(store, "LATEST")))
manifest = json.load(open(os.path.join(store, "snapshots", latest["snapshot"], "manifest.json")))

t0 = time.perf_counter()
ids, titles, bodies, vecs = [], [], [], []
for seg in manifest["segments"]:
    table = pq.read_table(os.path.join(store, "segments", seg["id"], "rows.parquet"),
                          columns=["id", "title", "body", "embedding"])
    ids += table.column("id").to_pylist()
    titles += [t or "" for t in table.column("title").to_pylist()]
    bodies += table.column("body").to_pylist()
    emb = table.column("embedding").combine_chunks()
    dim = emb.type.list_size
    # Format 8 keeps i8 vectors (scaled to 127); 1-7 kept float32. Unit length again either way.
    v = emb.values.to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32)
    vecs.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))
read_s = time.perf_counter() - t0

t0 = time.perf_counter()
db = sqlite3.connect(":memory:", check_same_thread=False)
db.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body, tokenize='porter unicode61')")
db.executemany("INSERT INTO fts(rowid, title, body) VALUES (?, ?, ?)",
               ((i, titles[i], bodies[i]) for i in range(len(ids))))
db.commit()
matrix = np.ascontiguousarray(np.vstack(vecs).astype(np.float32))
build_s = time.perf_counter() - t0

queries = json.load(open(vectors_file))
if len(sys.argv) > 4:
    queries = queries[:int(sys.argv[4])]
POOL, K, TOP = 50, 60.0, 10


def fts_query(text):
    words = re.findall(r"\w+", text.lower())
    return " OR ".join('"%s"' % w for w in words) or '""'


def sparse(text, conn):
    rows = conn.execute("SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts, 2.0, 1.0) LIMIT ?",
                        (fts_query(text), POOL)).fetchall()
    return [r[0] for r in rows]


def dense(vec):
    scores = matrix @ vec
    top = np.argpartition(-scores, min(POOL, len(scores) - 1))[:POOL]
    return list(top[np.argsort(-scores[top])])


def rrf(text, vec, conn):
    fused = {}
    for rank, i in enumerate(sparse(text, conn)):
        fused[i] = fused.get(i, 0.0) + 1.0 / (K + rank + 1)
    for rank, i in enumerate(dense(vec)):
        fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (K + rank + 1)
    return sorted(fused, key=fused.get, reverse=True)[:TOP]


def pct(ms):
    ms = sorted(ms)
    p = lambda q: ms[round((len(ms) - 1) * q)]
    return {"p50_ms": p(0.5), "p95_ms": p(0.95), "p99_ms": p(0.99), "n": len(ms)}


qv = [(q["query"], np.asarray(q["vector"], dtype=np.float32)) for q in queries]
modes = {}
for name, fn in [("sparse_only", lambda t, v: sparse(t, db)), ("dense_only", lambda t, v: dense(v)),
                 ("rrf", lambda t, v: rrf(t, v, db))]:
    ms = []
    for text, vec in qv:
        t = time.perf_counter()
        fn(text, vec)
        ms.append((time.perf_counter() - t) * 1000)
    modes[name] = {"search": pct(ms)}

# QPS with 8 threads (one SQLite connection each; sqlite3 and numpy release the GIL).
stop = threading.Event()
count = [0] * 8


def worker(i):
    conn = db  # an in-memory database is private to its connection: share it, serialised by sqlite
    k = i
    while not stop.is_set():
        text, vec = qv[k % len(qv)]
        rrf(text, vec, conn)
        count[i] += 1
        k += 1


threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
time.sleep(qps_seconds)
stop.set()
for t in threads:
    t.join()

print(json.dumps({
    "rows": len(ids),
    "read_seconds": read_s,
    "build_seconds": build_s,
    "build_rows_per_s": len(ids) / build_s,
    "modes": modes,
    "qps_rrf_8_threads": sum(count) / qps_seconds,
    "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}))
