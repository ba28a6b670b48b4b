"""Writes a chain of MatMul + Tanh layers, each with its own 64x64 weight,
as ONNX: a model where how far ahead weights are prefetched changes what
fits. Usage: matmul_chain.py OUT.onnx [LAYERS]"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
layers = int(sys.argv[2]) if len(sys.argv) > 2 else 12
nodes, weights, prev = [], [], "x"
for i in range(layers):
    w = np.random.RandomState(i).standard_normal((64, 64)).astype(np.float32) * 0.1
    weights.append(numpy_helper.from_array(w, f"w{i}"))
    nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
    nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"a{i}"]))
    prev = f"a{i}"
nodes.append(helper.make_node("ReduceMean", [prev], ["loss"], keepdims=0))
graph = helper.make_graph(
    nodes, "matmul_chain",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], weights)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, out)
