"""End-to-end: the bundled GPT example's forward loss through zinc matches PyTorch.

Compiles examples/gpt/gpt.onnx with --mode=infer, runs one step on
examples/gpt/data.safetensors on the cpu backend with --save-outputs and
--metrics, and checks the loss against examples/gpt/reference.json (PyTorch's
loss for step 0) within 1e-4 relative, and the metrics line against the fields
INTERFACES.md lists.

The tools come from $ZINC_BUILD_DIR/tools (default ./build/tools). Without them
the zinc tests are skipped, unless ZINC_BUILD_DIR is set, which makes missing
tools a failure. The check that reference.json belongs to gpt.onnx (a numpy
evaluation of the graph) needs no build.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GPT = os.path.join(ROOT, "examples", "gpt")
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import safetensors_io as st  # noqa: E402

RTOL = 1e-4
TIMEOUT = 600


def reference():
    with open(os.path.join(GPT, "reference.json")) as f:
        return json.load(f)


def rel_err(got, want):
    return abs(got - want) / abs(want)


class ZincGptForwardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        build = os.environ.get("ZINC_BUILD_DIR", "./build")
        cls.compile_bin = os.path.join(build, "tools", "zinc-compile")
        cls.run_bin = os.path.join(build, "tools", "zinc-run")
        missing = [p for p in (cls.compile_bin, cls.run_bin) if not os.access(p, os.X_OK)]
        if missing:
            if "ZINC_BUILD_DIR" in os.environ:
                raise AssertionError("ZINC_BUILD_DIR is set but %s missing" % missing)
            raise unittest.SkipTest("zinc tools not built (%s); set ZINC_BUILD_DIR"
                                    % ", ".join(missing))
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-gpt-")
        cls.plan = os.path.join(cls.tmp.name, "gpt.zplan")
        cls.outputs = os.path.join(cls.tmp.name, "outputs.safetensors")
        cls.metrics = os.path.join(cls.tmp.name, "metrics.jsonl")
        cls.compile_proc = subprocess.run(
            [cls.compile_bin, os.path.join(GPT, "gpt.onnx"), "--mode=infer", "-o", cls.plan],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        cls.run_proc = None
        if cls.compile_proc.returncode == 0:
            cls.run_proc = subprocess.run(
                [cls.run_bin, cls.plan, "--backend=cpu", "--steps=1",
                 "--data=" + os.path.join(GPT, "data.safetensors"),
                 "--save-outputs=" + cls.outputs, "--metrics=" + cls.metrics],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_tools_ran(self):
        self.assertEqual(self.compile_proc.returncode, 0,
                         "zinc-compile failed:\n" + self.compile_proc.stderr.decode())
        self.assertIsNotNone(self.run_proc)
        self.assertEqual(self.run_proc.returncode, 0,
                         "zinc-run failed:\n" + self.run_proc.stderr.decode())

    def test_loss_matches_pytorch(self):
        self.check_tools_ran()
        outputs = st.load_file(self.outputs)
        self.assertEqual(sorted(outputs), ["loss"])
        loss = outputs["loss"]
        self.assertEqual(st.dtype_tag(loss), "F32")
        self.assertEqual(loss.shape, ())
        want = reference()["step0_loss"]
        got = float(loss)
        self.assertLessEqual(rel_err(got, want), RTOL,
                             "zinc loss %.7f, PyTorch %.7f" % (got, want))

    def test_metrics_fields(self):
        self.check_tools_ran()
        with open(self.metrics) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, "one JSON object per step: %r" % lines)
        m = json.loads(lines[0])
        self.assertIsInstance(m, dict)
        self.assertEqual(m.get("step"), 0)
        self.assertIsInstance(m.get("loss"), (int, float))
        self.assertLessEqual(rel_err(m["loss"], reference()["step0_loss"]), RTOL)
        self.assertIsInstance(m.get("seconds"), (int, float))
        self.assertGreaterEqual(m["seconds"], 0)
        self.assertIsInstance(m.get("bytes"), dict)
        for key in ("h2d", "d2h", "nvme_read", "nvme_write", "allgather", "reduce_scatter"):
            self.assertIn(key, m["bytes"])
            self.assertIsInstance(m["bytes"][key], int, key)
            self.assertGreaterEqual(m["bytes"][key], 0, key)
        self.assertIsInstance(m.get("peak_bytes"), dict)
        for key in ("gpu", "cpu"):
            self.assertIsInstance(m["peak_bytes"].get(key), int, key)
            self.assertGreaterEqual(m["peak_bytes"][key], 0, key)
        # The weights alone are ~430 kB of fp32; they live in some tier.
        self.assertGreater(m["peak_bytes"]["gpu"] + m["peak_bytes"]["cpu"], 400000)


# ---------------------------------------------------------------------------
# The example itself: reference.json is the loss of gpt.onnx's graph on the
# data, checked by evaluating the ONNX graph with numpy (float64).

def _attrs(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _layer_norm(x, scale, bias, axis, epsilon):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * scale + bias


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sce_loss(scores, labels, reduction, ignore_index):
    if reduction != "mean" or scores.ndim != 2:
        raise NotImplementedError("SoftmaxCrossEntropyLoss %s on rank %d"
                                  % (reduction, scores.ndim))
    logp = np.log(_softmax(scores, 1))
    keep = labels != ignore_index
    picked = -logp[np.arange(len(labels))[keep], labels[keep]]
    return np.array(picked.sum() / keep.sum())


_erf = np.vectorize(math.erf)


def evaluate_onnx(model, feeds):
    """Evaluates the ops gpt.onnx uses; float tensors in float64."""
    from onnx import numpy_helper

    def f64(a):
        return a.astype(np.float64) if a.dtype.kind == "f" else a

    env = {t.name: f64(numpy_helper.to_array(t)) for t in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        x = [env[i] if i else None for i in node.input]
        a = _attrs(node)
        op = node.op_type
        if op == "Constant":
            y = f64(numpy_helper.to_array(a["value"]))
        elif op == "Add":
            y = x[0] + x[1]
        elif op == "Mul":
            y = x[0] * x[1]
        elif op == "Div":
            y = x[0] / x[1]
        elif op == "MatMul":
            y = np.matmul(x[0], x[1])
        elif op == "Reshape":
            shape = [d if d != 0 else x[0].shape[i] for i, d in enumerate(x[1])]
            y = x[0].reshape(shape)
        elif op == "Transpose":
            y = np.transpose(x[0], a.get("perm"))
        elif op == "Gather":
            y = np.take(x[0], x[1], axis=a.get("axis", 0))
        elif op == "Where":
            y = np.where(x[0], x[1], x[2])
        elif op == "Erf":
            y = _erf(x[0])
        elif op == "Softmax":
            y = _softmax(x[0], a.get("axis", -1))
        elif op == "LayerNormalization":
            y = _layer_norm(x[0], x[1], x[2], a.get("axis", -1), a.get("epsilon", 1e-5))
        elif op == "SoftmaxCrossEntropyLoss":
            y = _sce_loss(x[0], x[1], a.get("reduction", b"mean").decode(),
                          a.get("ignore_index", -100))
        else:
            raise NotImplementedError(op)
        env[node.output[0]] = y
    return {o.name: env[o.name] for o in model.graph.output}


class GptExampleTest(unittest.TestCase):
    def test_data_file(self):
        data = st.load_file(os.path.join(GPT, "data.safetensors"))
        self.assertEqual(sorted(data), ["targets", "tokens"])
        for name in ("tokens", "targets"):
            self.assertEqual(data[name].dtype, np.int64)
            self.assertEqual(data[name].shape, (16, 4, 32))
            self.assertTrue(((data[name] >= 0) & (data[name] < 64)).all())
        # targets are the next tokens
        np.testing.assert_array_equal(data["tokens"][:, :, 1:], data["targets"][:, :, :-1])

    def test_reference_is_the_graphs_loss(self):
        try:
            import onnx
        except ImportError:
            self.skipTest("onnx not installed")
        model = onnx.load(os.path.join(GPT, "gpt.onnx"))
        self.assertEqual([i.name for i in model.graph.input], ["tokens", "targets"])
        self.assertEqual([o.name for o in model.graph.output], ["loss"])
        data = st.load_file(os.path.join(GPT, "data.safetensors"))
        ref = reference()
        for step in (0, 5):
            loss = evaluate_onnx(model, {"tokens": data["tokens"][step],
                                         "targets": data["targets"][step]})["loss"]
            self.assertEqual(loss.shape, ())
            self.assertLessEqual(rel_err(float(loss), ref["forward_losses"][step]), 1e-5)
        self.assertEqual(ref["step0_loss"], ref["forward_losses"][0])


if __name__ == "__main__":
    unittest.main()
