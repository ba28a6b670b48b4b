# Writes a model whose graph nests If inside If LEVELS deep (each then-branch
# holds the next If; each else-branch is an Identity), as the ONNX textual
# syntax or as a binary protobuf, for the tests of nesting limits.
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("--levels", type=int, required=True)
parser.add_argument("--binary", action="store_true")
args = parser.parse_args()


def text_model(levels):
    # Built inside out, so no recursion in Python either.
    body = "y%d = Identity(x)" % levels
    for k in range(levels - 1, -1, -1):
        body = ("y%d = If <then_branch = t%d () => (float[2] y%d) { %s }, "
                "else_branch = e%d () => (float[2] z%d) { z%d = Identity(x) }> (c)"
                % (k, k, k + 1, body, k, k, k))
    return ('<ir_version: 8, opset_import: ["" : 17]>\n'
            "deep (bool c, float[2] x) => (float[2] y0) {\n%s\n}\n" % body)


def binary_model(levels):
    from onnx import TensorProto, helper
    node = helper.make_node("Identity", ["x"], ["y%d" % levels])
    for k in range(levels - 1, -1, -1):
        then = helper.make_graph([node], "t%d" % k, [], [
            helper.make_tensor_value_info("y%d" % (k + 1), TensorProto.FLOAT, [2])])
        other = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["z%d" % k])], "e%d" % k, [],
            [helper.make_tensor_value_info("z%d" % k, TensorProto.FLOAT, [2])])
        node = helper.make_node("If", ["c"], ["y%d" % k], then_branch=then,
                                else_branch=other)
    graph = helper.make_graph(
        [node], "deep",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


if args.binary:
    with open(args.output, "wb") as f:
        f.write(binary_model(args.levels))
else:
    with open(args.output, "w") as f:
        f.write(text_model(args.levels))
