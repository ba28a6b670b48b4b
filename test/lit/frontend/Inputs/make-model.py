# Writes a small binary ONNX model (MatMul by a 64x64 float initializer 'w'),
# optionally with 'w' in an external data file, for the frontend's lit tests.
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--external", metavar="FILE",
                    help="store the initializers in FILE beside the model")
args = parser.parse_args()

w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])], [w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
if args.external:
    onnx.save_model(model, args.output, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=args.external,
                    size_threshold=0)
else:
    onnx.save_model(model, args.output)
