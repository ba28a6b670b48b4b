"""Writes, as binary ONNX, what PyTorch's exporter makes of Linear layers
on rank-3 inputs when it folds constants: the transposed weights become
initializers named `onnx::MatMul_<n>`, read by MatMul nodes named after
their module (`/blocks.0/q/MatMul`). Beside them, exporter-named
initializers that name no parameter: one read by MatMuls of two modules,
one added at the top level, one whose module's `weight` is already an
initializer. And an exporter-named initializer aliased by Identity nodes
under its parameter's names (two, tied). Usage: make-folded-export.py OUT.onnx"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def init(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


inits = [init("onnx::MatMul_7", 4, 4), init("blocks.0.q.bias", 4),
         init("onnx::MatMul_8", 4, 5), init("onnx::MatMul_9", 4, 4),
         init("onnx::Add_10", 3, 4), init("lin.weight", 4),
         init("onnx::MatMul_11", 4, 4), init("onnx::Identity_12", 5)]
nodes = [
    helper.make_node("MatMul", ["x", "onnx::MatMul_7"], ["q"], name="/blocks.0/q/MatMul"),
    helper.make_node("Add", ["q", "blocks.0.q.bias"], ["qb"], name="/blocks.0/q/Add"),
    helper.make_node("MatMul", ["qb", "onnx::MatMul_9"], ["a"], name="/blocks.0/a/MatMul"),
    helper.make_node("MatMul", ["a", "onnx::MatMul_9"], ["b"], name="/blocks.1/a/MatMul"),
    helper.make_node("Add", ["b", "onnx::Add_10"], ["c"], name="/Add"),
    helper.make_node("MatMul", ["c", "onnx::MatMul_11"], ["d"], name="/lin/MatMul"),
    helper.make_node("Add", ["d", "lin.weight"], ["e"], name="/lin/Add"),
    helper.make_node("MatMul", ["e", "onnx::MatMul_8"], ["h"], name="/head/MatMul"),
    helper.make_node("Identity", ["onnx::Identity_12"], ["tied.weight"], name="Identity_0"),
    helper.make_node("Identity", ["onnx::Identity_12"], ["out.weight"], name="Identity_1"),
    helper.make_node("Add", ["h", "tied.weight"], ["h2"], name="/Add_1"),
    helper.make_node("Add", ["h2", "out.weight"], ["y"], name="/Add_2"),
]
graph = helper.make_graph(
    nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
