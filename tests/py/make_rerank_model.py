"""Writes a tiny cross-encoder for tests: DIR/model.onnx + DIR/tokenizer.json.

The "model" reads (query, passage) pairs as a BERT cross-encoder does (input_ids,
attention_mask, token_type_ids) and gives one logit per pair: how many times WORD's token
occurs in the passage half (token_type_ids == 1). It is not a relevance model; it lets a test
check that hubdex tokenizes pairs, runs the graph and reorders results by its logits.

usage: make_rerank_model.py TOKENIZER_JSON WORD DIR
"""
import json
import os
import shutil
import sys

import onnx
from onnx import TensorProto, helper

tokenizer, word, out = sys.argv[1], sys.argv[2], sys.argv[3]
vocab = json.load(open(tokenizer))["model"]["vocab"]
if word not in vocab:
    sys.exit(f"{word!r} is not one token of {tokenizer}")
token = vocab[word]

inputs = [
    helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
    for n in ("input_ids", "attention_mask", "token_type_ids")
]
output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
nodes = [
    helper.make_node("Constant", [], ["word"], value=helper.make_tensor("w", TensorProto.INT64, [], [token])),
    helper.make_node("Equal", ["input_ids", "word"], ["is_word"]),
    helper.make_node("Cast", ["is_word"], ["is_word_f"], to=TensorProto.FLOAT),
    helper.make_node("Cast", ["token_type_ids"], ["in_passage"], to=TensorProto.FLOAT),
    helper.make_node("Mul", ["is_word_f", "in_passage"], ["hits"]),
    helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("a", TensorProto.INT64, [1], [1])),
    helper.make_node("ReduceSum", ["hits", "axes"], ["logits"], keepdims=1),
]
graph = helper.make_graph(nodes, "count_word", inputs, [output])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
os.makedirs(out, exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
shutil.copy(tokenizer, os.path.join(out, "tokenizer.json"))
print(token)
