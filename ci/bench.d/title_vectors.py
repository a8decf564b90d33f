"""Would a second, title-only vector per commit row help the *default* (rrf), not only the dense
list? Measured on the fd commit set before building it (docs/quality.md, "What the defaults
are, and why"): hubdex's own sparse_only and dense_only lists for every query (top 50 commits,
through the REST API of a running `hubdex serve --http`), a title-only vector per commit row embedded
here with the same model, and RRF k = 20 over entity ranks, as the default fuses.

usage: HUBDEX_MODEL_DIR=... python title_vectors.py URL STORE_DIR FD_JSONL
  URL        a `hubdex serve --http` over STORE_DIR, e.g. http://127.0.0.1:8790
  STORE_DIR  ci/bench-quality's store-fd (one segment: sharkdp/fd's commits and diffs)
"""
import glob, json, os, sys, urllib.request
import numpy as np, pyarrow.parquet as pq
import onnxruntime as ort
from tokenizers import Tokenizer

url, store, fd_jsonl = sys.argv[1:4]
model_dir = os.environ["HUBDEX_MODEL_DIR"]
qs = [json.loads(l) for l in open(fd_jsonl)]


def search(query, fusion, top_k):
    body = json.dumps({"query": query, "fusion": fusion, "type": "commit", "top_k": top_k}).encode()
    req = urllib.request.Request(url + "/v1/search", body, {"content-type": "application/json"})
    answer = json.load(urllib.request.urlopen(req))
    return [r["commit_sha"] for r in answer["results"]]


lists = {m: [search(q["query"], m, 50) for q in qs] for m in ("sparse_only", "dense_only", "rrf")}

# Commit rows of the build segment: the title-only vector per commit.
seg = sorted(glob.glob(os.path.join(store, "segments/local-fd-*/rows.parquet")))[-1]
t = pq.read_table(seg, columns=["type", "commit_sha", "title", "embedding"]).to_pydict()
keep = [i for i, ty in enumerate(t["type"]) if ty == "commit"]
shas = [t["commit_sha"][i] for i in keep]
titles = [t["title"][i] or "" for i in keep]
E = np.array([t["embedding"][i] for i in keep], dtype=np.float32)
E /= np.linalg.norm(E, axis=1, keepdims=True)  # unit length (format 8 keeps i8: unit vector x 127)

tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
tok.no_padding()
tok.enable_truncation(256)
sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), providers=["CPUExecutionProvider"])
names = {i.name for i in sess.get_inputs()}


def embed(texts):
    out = []
    for s in range(0, len(texts), 64):
        enc = tok.encode_batch(texts[s:s + 64])
        seq = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), seq), np.int64)
        mask = np.zeros_like(ids)
        for b, e in enumerate(enc):
            ids[b, :len(e.ids)] = e.ids
            mask[b, :len(e.ids)] = e.attention_mask
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids)
        h = sess.run(None, feed)[0]
        m = mask[..., None].astype(np.float32)
        v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return np.concatenate(out)


T = embed([ti + "\n" for ti in titles])
Q = embed([q["query"] for q in qs])


def ranked(S):
    return [[shas[j] for j in np.argsort(-S[i])[:50]] for i in range(len(qs))]


dense_body = ranked(Q @ E.T)
dense_title = ranked(Q @ T.T)
dense_max = ranked(np.maximum(Q @ E.T, Q @ T.T))


def rrf(*ls, k=20.0):
    out = []
    for per_query in zip(*ls):
        score = {}
        for lst in per_query:
            for r, sha in enumerate(lst):
                score[sha] = score.get(sha, 0.0) + 1.0 / (k + r + 1)
        out.append(sorted(score, key=lambda s: -score[s]))
    return out


def judge(name, ranking):
    rec = mrr = 0.0
    for q, top in zip(qs, ranking):
        top = top[:10]
        rel = set(q["relevant"])
        rec += len(rel & set(top)) / len(rel)
        mrr += next((1 / (r + 1) for r, s in enumerate(top) if s in rel), 0)
    print(f"{name:48s} recall@10 {rec / len(qs):.3f}  MRR@10 {mrr / len(qs):.3f}")


judge("hubdex sparse_only", lists["sparse_only"])
judge("hubdex dense_only", lists["dense_only"])
judge("hubdex rrf (default)", lists["rrf"])
judge("exact dense, title + description (as stored)", dense_body)
judge("exact dense, title only", dense_title)
judge("exact dense, max-sim of both", dense_max)
judge("rrf: hubdex sparse + hubdex dense (replayed)", rrf(lists["sparse_only"], lists["dense_only"]))
judge("rrf: hubdex sparse + exact dense (stored)", rrf(lists["sparse_only"], dense_body))
judge("rrf: hubdex sparse + exact dense max-sim", rrf(lists["sparse_only"], dense_max))
judge("rrf: sparse + dense stored + dense title (3 lists)",
      rrf(lists["sparse_only"], dense_body, dense_title))
