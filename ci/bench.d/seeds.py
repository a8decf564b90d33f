"""The seeds' stack, the baseline hubdex's ranking is compared with: rank_bm25 (Okapi, identifier
split) for sparse, MiniLM (the same int8 ONNX model, mean pooling, 256 tokens) with exact cosine
for dense, and reciprocal rank fusion with k = 60 — over the same corpus and judged queries as
`hubdex eval`, judged the same way: each list folded to one row per entity (a file, a commit),
its best-ranked, as hubdex answers. Prints a table like `hubdex eval`'s, or JSON with --json.

usage: seeds.py EVAL.jsonl MODEL_DIR (--git REPO_DIR | --store STORE_DIR --type T) [--json]

  --git DIR      corpus: every commit of the repository (git log --all), text = message + files
  --store DIR    corpus: the rows of type T in the store's newest snapshot (rows.parquet of
                 every build segment), text = title + body
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pyarrow.parquet as pq
from rank_bm25 import BM25Okapi
from tokenizers import Tokenizer

K = 10


def tokens(text):
    """Words, with identifiers also split at case changes, _ and - (the seeds' analyzer)."""
    out = []
    for word in re.findall(r"[A-Za-z0-9_]+", text):
        out.append(word.lower())
        parts = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", word)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


def git_corpus(repo):
    log = subprocess.run(
        ["git", "-C", repo, "log", "--all", "--name-only", "--format=%x01%H%x00%B%x00"],
        capture_output=True, text=True, errors="replace", check=True).stdout
    docs = []
    for rec in log.split("\x01")[1:]:
        sha, message, files = rec.split("\x00", 2)
        files = [f for f in files.split("\n") if f.strip()]
        docs.append({"sha": sha, "repo": None, "path": None, "lines": None, "entity": sha,
                     "text": message.strip() + ("\n\nFiles: " + ", ".join(files) if files else "")})
    return docs


def store_corpus(store, row_type):
    latest = json.load(open(os.path.join(store, "LATEST")))
    manifest = json.load(open(os.path.join(store, "snapshots", latest["snapshot"], "manifest.json")))
    docs = []
    for seg in manifest["segments"]:
        t = pq.read_table(os.path.join(store, "segments", seg["id"], "rows.parquet"),
                          columns=["type", "repo", "entity", "title", "body", "path", "line_start",
                                   "line_end", "commit_sha"])
        for r in t.to_pylist():
            if r["type"] != row_type:
                continue
            lines = (r["line_start"], r["line_end"]) if r["line_start"] is not None else None
            docs.append({"sha": r["commit_sha"], "repo": r["repo"], "path": r["path"], "lines": lines,
                         "entity": (r["repo"], r["entity"]),
                         "text": ((r["title"] or "") + "\n" + r["body"]).strip()})
    return docs


def matches(spec, doc, repo):
    """eval.rs's `matches`: a sha names a commit, path:L(-M) a line span."""
    if re.fullmatch(r"[0-9a-fA-F]{7,40}", spec):
        return doc["sha"] is not None and doc["path"] is None and doc["sha"].startswith(spec)
    if ":" not in spec:
        return False
    path, lines = spec.rsplit(":", 1)
    a, _, b = lines.partition("-")
    try:
        a, b = int(a), int(b or a)
    except ValueError:
        return False
    return ((repo is None or repo == doc["repo"]) and doc["path"] == path and doc["lines"] is not None
            and doc["lines"][0] <= b and doc["lines"][1] >= a)


class Embedder:
    def __init__(self, model_dir):
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(256)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = os.cpu_count() or 1
        self.sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), opts,
                                         providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def __call__(self, texts, batch=32):
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            enc = self.tok.encode_batch([texts[i] for i in idx])
            seq = max(len(e.ids) for e in enc)
            ids = np.zeros((len(enc), seq), dtype=np.int64)
            mask = np.zeros_like(ids)
            for b, e in enumerate(enc):
                ids[b, :len(e.ids)] = e.ids
                mask[b, :len(e.ids)] = e.attention_mask
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.sess.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            v = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            out[idx] = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return out


def fold(ranked, docs):
    """One result per entity (a file, a commit), its best-ranked row: as hubdex answers."""
    seen, out = set(), []
    for d in ranked:
        if docs[d]["entity"] not in seen:
            seen.add(docs[d]["entity"])
            out.append(d)
    return out


def score(ranked, q, docs):
    """recall@10, reciprocal rank and nDCG@10 of one ranked list of doc indices."""
    seen, first, dcg = set(), None, 0.0
    for rank, d in enumerate(ranked[:K]):
        hit = [i for i, spec in enumerate(q["relevant"])
               if i not in seen and matches(spec, docs[d], q.get("repo"))]
        if hit:
            seen.update(hit)
            first = rank if first is None else first
            dcg += 1.0 / np.log2(rank + 2)
    ideal = sum(1.0 / np.log2(i + 2) for i in range(min(len(q["relevant"]), K)))
    return len(seen) / len(q["relevant"]), (1.0 / (first + 1) if first is not None else 0.0), dcg / ideal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("eval")
    ap.add_argument("model_dir")
    ap.add_argument("--git")
    ap.add_argument("--store")
    ap.add_argument("--type")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if bool(a.git) == bool(a.store) or (a.store and not a.type):
        sys.exit("seeds.py: give --git DIR, or --store DIR with --type T")
    docs = git_corpus(a.git) if a.git else store_corpus(a.store, a.type)
    queries = [json.loads(l) for l in open(a.eval) if l.strip()]
    bm25 = BM25Okapi([tokens(d["text"]) for d in docs])
    embed = Embedder(a.model_dir)
    doc_vecs = embed([d["text"] for d in docs])
    query_vecs = embed([q["query"] for q in queries])
    sums = {m: np.zeros(3) for m in ("sparse", "dense", "rrf k=60")}
    for q, qv in zip(queries, query_vecs):
        sparse = list(np.argsort(-bm25.get_scores(tokens(q["query"])), kind="stable")[:300])
        dense = list(np.argsort(-(doc_vecs @ qv), kind="stable")[:300])
        fused = {}
        for lst in (sparse, dense):
            for r, d in enumerate(lst):
                fused[d] = fused.get(d, 0.0) + 1.0 / (60 + r + 1)
        rrf = sorted(fused, key=lambda d: -fused[d])
        for m, ranked in (("sparse", sparse), ("dense", dense), ("rrf k=60", rrf)):
            sums[m] += score(fold(ranked, docs), q, docs)
    n = len(queries)
    rows = [{"mode": "seeds " + m, "queries": n, "recall_at_k": s[0] / n, "mrr_at_k": s[1] / n,
             "ndcg_at_10": s[2] / n} for m, s in sums.items()]
    if a.json:
        print(json.dumps({"docs": len(docs), "modes": rows}))
        return
    print(f"{'mode':<16} {'queries':>8} {'recall@10':>10} {'MRR@10':>8} {'nDCG@10':>8}   ({len(docs)} docs)")
    for r in rows:
        print(f"{r['mode']:<16} {r['queries']:>8} {r['recall_at_k']:>10.3f} {r['mrr_at_k']:>8.3f} "
              f"{r['ndcg_at_10']:>8.3f}")


if __name__ == "__main__":
    main()
