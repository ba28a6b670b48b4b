"""Shape-only GPT models for compile benchmarks: ONNX written with onnx.helper.

A GPT-2/GPT-3-style decoder training graph, spelled out op by op as PyTorch's
exporter writes examples/gpt/gpt.onnx (opset 17, static shapes):

  tokens [B, T] int64 -> Gather(tok_emb [V, D]) + pos_emb [T, D]
  per layer (pre-LN):
    h = LayerNormalization(x)
    q, k, v = h @ Wq + bq, h @ Wk + bk, h @ Wv + bv      (MatMul, Add)
    each Reshape [B, T, H, D/H] -> Transpose (q, v: [0,2,1,3]; k: [0,2,3,1])
    s = (q @ k^T) / sqrt(D/H); Where(causal_mask, -inf, s); Softmax(-1)
    a = s @ v -> Transpose [0,2,1,3] -> Reshape [B, T, D] -> @ Wo + bo
    x = x + a
    h = LayerNormalization(x); u = h @ W1 + b1          (D -> 4D)
    GELU as exporters spell it: u * (Erf(u / sqrt 2) + 1) * 0.5
    x = x + (g @ W2 + b2)                               (4D -> D)
  LayerNormalization -> @ head [D, V] (untied, no bias)
  -> Reshape [B*T, V], targets Reshape [B*T]
  -> SoftmaxCrossEntropyLoss(mean) -> `loss`

Every float initializer is stored as external data (data_location=EXTERNAL)
in a file, `weights.bin` by default, that is never written: offsets are
consistent (each tensor 64-byte aligned after the previous one), so the
model file stays a few KB (plus the inline bool causal mask, T*T bytes),
and zinc-compile warns that the weights are missing and plans anyway. The
scalar and shape constants are Constant nodes, shared by all layers (so
the node count is the compute nodes plus a handful).

Parameters: 12 D^2 + 13 D per layer, V D + T D embeddings, 2 D final
LayerNorm, D V head; `param_count` computes it without building anything.

Run: /usr/bin/python3 bench/shape_gpt.py OUT.onnx --layers 24 --d-model 2048 --heads 16
"""

import argparse
import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper

OPSET = 17
ALIGN = 64


class Config:
    """A GPT configuration. `vocab` defaults to GPT-2's 50257 tokens."""

    def __init__(self, name, layers, d_model, heads, seq=2048, batch=1, vocab=50257):
        if d_model % heads:
            raise ValueError("d_model %d is not a multiple of heads %d" % (d_model, heads))
        self.name, self.layers, self.d_model, self.heads = name, layers, d_model, heads
        self.seq, self.batch, self.vocab = seq, batch, vocab

    def as_dict(self):
        return {"name": self.name, "layers": self.layers, "d_model": self.d_model,
                "heads": self.heads, "seq": self.seq, "batch": self.batch,
                "vocab": self.vocab, "params": param_count(self),
                "onnx_nodes": node_count(self)}


def param_count(c):
    """Float initializer elements of the model `build_model(c)` writes."""
    d, v = c.d_model, c.vocab
    per_layer = 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    return c.layers * per_layer + v * d + c.seq * d + 2 * d + d * v


# Compute nodes per layer (see the module docstring), the nodes around the
# layers, and the shared Constant nodes.
NODES_PER_LAYER = 34
NODES_OUTSIDE_LAYERS = 7
SHARED_CONSTANTS = 9


def node_count(c):
    """ONNX nodes of the graph `build_model(c)` writes, Constant nodes included."""
    return c.layers * NODES_PER_LAYER + NODES_OUTSIDE_LAYERS + SHARED_CONSTANTS


def layers_for_nodes(nodes):
    """The fewest layers whose graph has at least `nodes` ONNX nodes."""
    fixed = NODES_OUTSIDE_LAYERS + SHARED_CONSTANTS
    return max(1, -(-(nodes - fixed) // NODES_PER_LAYER))


class _Builder:
    def __init__(self, data_file):
        self.nodes, self.inits = [], []
        self.data_file = data_file
        self.offset = 0

    def node(self, op, inputs, output, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], name=name, **attrs))
        return output

    def weight(self, name, shape):
        """A float32 initializer whose bytes live in the (absent) data file."""
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        length = 4 * int(np.prod(shape, dtype=np.int64))
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.data_file), ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.offset += -(-length // ALIGN) * ALIGN
        self.inits.append(t)
        return name

    def constant(self, name, array):
        self.nodes.append(helper.make_node(
            "Constant", [], [name], name=name,
            value=helper.make_tensor(name + "_value", _onnx_type(array), array.shape,
                                     array.ravel().tolist())))
        return name


def _onnx_type(array):
    return {np.dtype(np.float32): TensorProto.FLOAT,
            np.dtype(np.int64): TensorProto.INT64}[array.dtype]


def build_model(c, data_file="weights.bin"):
    """The ModelProto of configuration `c`; float weights external in `data_file`."""
    b = _Builder(data_file)
    B, T, D, H, V = c.batch, c.seq, c.d_model, c.heads, c.vocab
    dh = D // H
    f32 = lambda x: np.array(x, dtype=np.float32)  # noqa: E731
    i64 = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    heads_shape = b.constant("/Constant_heads_shape", i64([B, T, H, dh]))
    merge_shape = b.constant("/Constant_merge_shape", i64([B, T, D]))
    scale = b.constant("/Constant_attn_scale", f32(math.sqrt(dh)))
    neg_inf = b.constant("/Constant_neg_inf", f32(-np.inf))
    sqrt2 = b.constant("/Constant_sqrt2", f32(math.sqrt(2.0)))
    one = b.constant("/Constant_one", f32(1.0))
    half = b.constant("/Constant_half", f32(0.5))
    # True where a query may not attend the key (key after query), as the
    # exporter folds ~tril(ones) into a bool constant: one for every layer.
    mask = helper.make_tensor("causal_mask", TensorProto.BOOL, [T, T],
                              np.triu(np.ones((T, T), np.bool_), 1).tobytes(), raw=True)

    x = b.node("Gather", [b.weight("tok_emb.weight", [V, D]), "tokens"],
               "/tok_emb/Gather_output_0", "/tok_emb/Gather")
    x = b.node("Add", [x, b.weight("pos_emb", [T, D])], "/Add_output_0", "/Add")

    def linear(p, h, d_in, d_out, prefix):
        y = b.node("MatMul", [h, b.weight(p + ".weight", [d_in, d_out])],
                   prefix + "/MatMul_output_0", prefix + "/MatMul")
        return b.node("Add", [b.weight(p + ".bias", [d_out]), y],
                      prefix + "/Add_output_0", prefix + "/Add")

    def layer_norm(p, h, prefix):
        return b.node("LayerNormalization",
                      [h, b.weight(p + ".weight", [D]), b.weight(p + ".bias", [D])],
                      prefix + "/LayerNormalization_output_0", prefix + "/LayerNormalization",
                      axis=-1, epsilon=1e-5)

    for i in range(c.layers):
        p, s = "blocks.%d" % i, "/blocks.%d" % i
        h = layer_norm(p + ".ln1", x, s + "/ln1")
        qkv = {}
        for j, (w, perm) in enumerate((("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]),
                                       ("v", [0, 2, 1, 3]))):
            y = linear("%s.attn.%s" % (p, w), h, D, D, "%s/attn/%s" % (s, w))
            y = b.node("Reshape", [y, heads_shape], "%s/attn/Reshape_%d_output_0" % (s, j),
                       "%s/attn/Reshape_%d" % (s, j))
            qkv[w] = b.node("Transpose", [y], "%s/attn/Transpose_%d_output_0" % (s, j),
                            "%s/attn/Transpose_%d" % (s, j), perm=perm)
        a = b.node("MatMul", [qkv["q"], qkv["k"]], s + "/attn/MatMul_output_0",
                   s + "/attn/MatMul")
        a = b.node("Div", [a, scale], s + "/attn/Div_output_0", s + "/attn/Div")
        a = b.node("Where", ["causal_mask", neg_inf, a], s + "/attn/Where_output_0",
                   s + "/attn/Where")
        a = b.node("Softmax", [a], s + "/attn/Softmax_output_0", s + "/attn/Softmax", axis=-1)
        a = b.node("MatMul", [a, qkv["v"]], s + "/attn/MatMul_1_output_0", s + "/attn/MatMul_1")
        a = b.node("Transpose", [a], s + "/attn/Transpose_3_output_0", s + "/attn/Transpose_3",
                   perm=[0, 2, 1, 3])
        a = b.node("Reshape", [a, merge_shape], s + "/attn/Reshape_3_output_0",
                   s + "/attn/Reshape_3")
        a = linear(p + ".attn.proj", a, D, D, s + "/attn/proj")
        x = b.node("Add", [x, a], s + "/Add_output_0", s + "/Add")
        h = layer_norm(p + ".ln2", x, s + "/ln2")
        u = linear(p + ".fc", h, D, 4 * D, s + "/fc")
        g = b.node("Div", [u, sqrt2], s + "/Div_output_0", s + "/Div")
        g = b.node("Erf", [g], s + "/Erf_output_0", s + "/Erf")
        g = b.node("Add", [g, one], s + "/Add_1_output_0", s + "/Add_1")
        g = b.node("Mul", [u, g], s + "/Mul_output_0", s + "/Mul")
        g = b.node("Mul", [g, half], s + "/Mul_1_output_0", s + "/Mul_1")
        y = linear(p + ".out", g, 4 * D, D, s + "/out")
        x = b.node("Add", [x, y], s + "/Add_2_output_0", s + "/Add_2")

    x = layer_norm("ln_f", x, "/ln_f")
    logits = b.node("MatMul", [x, b.weight("head.weight", [D, V])], "/head/MatMul_output_0",
                    "/head/MatMul")
    flat_logits = b.constant("/Constant_logits_shape", i64([B * T, V]))
    flat_targets = b.constant("/Constant_targets_shape", i64([B * T]))
    logits = b.node("Reshape", [logits, flat_logits], "/Reshape_output_0", "/Reshape")
    targets = b.node("Reshape", ["targets", flat_targets], "/Reshape_1_output_0", "/Reshape_1")
    b.node("SoftmaxCrossEntropyLoss", [logits, targets], "loss", "/SoftmaxCrossEntropyLoss",
           reduction="mean")

    graph = helper.make_graph(
        b.nodes, "shape_gpt_" + c.name,
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, [B, T]),
         helper.make_tensor_value_info("targets", TensorProto.INT64, [B, T])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        b.inits + [mask])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="zinc bench/shape_gpt.py")
    model.ir_version = 8
    assert len(model.graph.node) == node_count(c), (len(model.graph.node), node_count(c))
    return model


def write_model(c, path, data_file="weights.bin"):
    """Writes configuration `c` to `path`; the data file is not created."""
    model = build_model(c, data_file)
    data = os.path.join(os.path.dirname(os.path.abspath(path)), data_file)
    if os.path.exists(data):
        raise FileExistsError("%s exists: the benchmark expects no weights beside the model" % data)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("output")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--d-model", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--data-file", default="weights.bin")
    args = ap.parse_args(argv)
    c = Config(os.path.splitext(os.path.basename(args.output))[0], args.layers, args.d_model,
               args.heads, args.seq, args.batch, args.vocab)
    write_model(c, args.output, args.data_file)
    print("%s: %d params, %d ONNX nodes, %d bytes" % (
        args.output, param_count(c), node_count(c), os.path.getsize(args.output)))


if __name__ == "__main__":
    sys.exit(main())
