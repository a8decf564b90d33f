"""Raw ONNX Runtime (Python) on the same model, texts and batch size as hubdex's embedder:
tokenizers + onnxruntime + mean pooling + L2 in numpy, batches sorted by length and padded per
batch, as hubdex does. Prints one JSON object.

usage: ort_embed.py MODEL_DIR TEXTS_JSON BATCH
"""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

model_dir, texts_file, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
texts = json.load(open(texts_file))
tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
tok.no_padding()
tok.enable_truncation(256)
opts = ort.SessionOptions()
opts.intra_op_num_threads = os.cpu_count() or 1
sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), opts, providers=["CPUExecutionProvider"])
inputs = {i.name for i in sess.get_inputs()}


def embed(chunk):
    enc = tok.encode_batch(chunk)
    seq = max(len(e.ids) for e in enc)
    ids = np.zeros((len(enc), seq), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for b, e in enumerate(enc):
        ids[b, :len(e.ids)] = e.ids
        mask[b, :len(e.ids)] = e.attention_mask
        types[b, :len(e.ids)] = e.type_ids
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in inputs:
        feed["token_type_ids"] = types
    hidden = sess.run(None, feed)[0]
    m = mask[..., None].astype(np.float32)
    v = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
embed([texts[i] for i in order[:batch]])  # warm-up, as hubdex's run has
t = time.perf_counter()
for s in range(0, len(order), batch):
    embed([texts[i] for i in order[s:s + batch]])
secs = time.perf_counter() - t
print(json.dumps({"texts": len(texts), "batch": batch, "seconds": secs, "chunks_per_s": len(texts) / secs,
                  "onnxruntime": ort.__version__}))
