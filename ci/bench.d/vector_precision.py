"""Dense-only quality of the fd commit set (ci/bench-quality's store-fd) with the snapshot's
float32 vectors stored as f32, f16 and i8 (usearch's i8: normalised, x127, rounded), exact
cosine over the commit rows, one answer per commit. Answers: what would storing vectors.usearch
as i8 cost in recall@10 / MRR@10? (docs/performance.md).

usage: HUBDEX_MODEL_DIR=... python vector_precision.py   (after ./ci/bench-quality built store-fd)
"""
import json, os, sys, glob
import numpy as np, pyarrow.parquet as pq
import onnxruntime as ort
from tokenizers import Tokenizer
model_dir = os.environ["HUBDEX_MODEL_DIR"]
seg = glob.glob(os.path.expanduser("~/.cache/hubdex/bench-quality/store-fd/segments/local-fd-*/rows.parquet"))[0]
if "int8" in str(pq.read_schema(seg).field("embedding").type):
    sys.exit("vector_precision.py compares float32 vectors with their f16 and i8 casts: it needs a "
             "store written before format 8 (format 8 keeps the i8 vectors only, docs/format.md)")
t = pq.read_table(seg, columns=["type", "commit_sha", "embedding"]).to_pydict()
keep = [i for i, ty in enumerate(t["type"]) if ty == "commit"]
E = np.array([t["embedding"][i] for i in keep], dtype=np.float32)
shas = [t["commit_sha"][i] for i in keep]
qs = [json.loads(l) for l in open(os.path.expanduser("~/.cache/hubdex/bench-quality/fd.jsonl"))]
tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json")); tok.no_padding(); tok.enable_truncation(256)
sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), providers=["CPUExecutionProvider"])
names = {i.name for i in sess.get_inputs()}
def embed(texts):
    enc = tok.encode_batch(texts); seq = max(len(e.ids) for e in enc)
    ids = np.zeros((len(enc), seq), np.int64); mask = np.zeros_like(ids)
    for b, e in enumerate(enc):
        ids[b, :len(e.ids)] = e.ids; mask[b, :len(e.ids)] = e.attention_mask
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in names: feed["token_type_ids"] = np.zeros_like(ids)
    h = sess.run(None, feed)[0]; m = mask[..., None].astype(np.float32)
    v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
Q = np.concatenate([embed([q["query"] for q in qs[i:i+32]]) for i in range(0, len(qs), 32)])
def quant(x, kind):
    if kind == "f32": return x
    if kind == "f16": return x.astype(np.float16).astype(np.float32)
    n = x / np.linalg.norm(x, axis=1, keepdims=True)
    return np.clip(np.round(n * 127), -127, 127).astype(np.float32)
for kind in ["f32", "f16", "i8"]:
    D, Qk = quant(E, kind), quant(Q, kind)
    D = D / np.linalg.norm(D, axis=1, keepdims=True); Qk = Qk / np.linalg.norm(Qk, axis=1, keepdims=True)
    S = Qk @ D.T
    rec = mrr = 0.0
    for i, q in enumerate(qs):
        top = []
        for j in np.argsort(-S[i]):
            if shas[j] not in top: top.append(shas[j])
            if len(top) == 10: break
        rel = set(q["relevant"])
        rec += len(rel & set(top)) / len(rel)
        mrr += next((1 / (r + 1) for r, s in enumerate(top) if s in rel), 0)
    print(kind, "recall@10 %.3f MRR@10 %.3f" % (rec / len(qs), mrr / len(qs)), "bytes/vector", {"f32": 1536, "f16": 768, "i8": 384}[kind])
