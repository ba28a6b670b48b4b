# Writes a binary ONNX model y = x @ w whose initializer w [N, M] is external
# data that is never written: a plan larger than any test machine, which
# compiles (the compiler reads no weights) and which zinc-run must refuse
# before it reads one.
import sys

import onnx
from onnx import TensorProto, helper

path, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n, m],
                data_location=TensorProto.EXTERNAL)
for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(4 * n * m))):
    entry = w.external_data.add()
    entry.key, entry.value = key, value
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, m])], [w])
onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
