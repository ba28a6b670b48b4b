"""Writes the ONNX model of repeat_interleave as PyTorch 1.13 exports it
(SplitToSequence, a Loop of SequenceAt / SequenceInsert over the first
dimension, ConcatFromSequence): onnx's text syntax has no sequence types.
Usage: make-repeat-interleave.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

seq_float = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
body = helper.make_graph(
    [helper.make_node("Identity", ["c"], ["c2"]),
     helper.make_node("SequenceAt", ["seq", "i"], ["e"]),
     helper.make_node("Concat", ["e", "e"], ["twice"], axis=0),
     helper.make_node("SequenceInsert", ["acc", "twice"], ["acc2"])],
    "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("c", TensorProto.BOOL, []),
     helper.make_value_info("acc", seq_float)],
    [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
     helper.make_value_info("acc2", seq_float)])
graph = helper.make_graph(
    [helper.make_node("Shape", ["x"], ["s"]),
     helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
     helper.make_node("Gather", ["s", "zero"], ["n0"], axis=0),
     helper.make_node("Constant", [], ["yes"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
     helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0, keepdims=1),
     helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
     helper.make_node("Loop", ["n0", "yes", "empty"], ["out"], body=body),
     helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=0)],
    "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
