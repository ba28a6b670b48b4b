"""Self-test of run_node_tests.py against stand-in tools (no zinc build needed).

The stand-in zinc-compile / zinc-run (Python scripts written to a temporary
build dir) follow INTERFACES.md's command lines and evaluate a handful of ops
with numpy; each test model here exercises one path of the runner: pass,
integer inputs baked into initializers, the all-initializers retry, a wrong
result, a wrong shape, unsupported, a crash, a timeout, a non-zero exit, a
declared input shape that disagrees with its data. PassListTest checks the
pass list's verdicts (regressions fail --expect-clean, new passes do not)
and --update-pass-list.

Run: /usr/bin/python3 -m unittest discover -s test/conformance
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_node_tests.py")
LIB = os.path.join(os.path.dirname(HERE), "lib")

FAKE_COMPILE = r'''#!/usr/bin/python3
import json, sys, onnx
model, plan = sys.argv[1], sys.argv[sys.argv.index("-o") + 1]
assert "--mode=infer" in sys.argv
m = onnx.load(model)
inits = {t.name for t in m.graph.initializer}  # grows: constant-folded values
for vi in m.graph.input:
    if vi.name not in inits and not all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim):
        print("zinc-compile: error: %s: input '%s': unbound dimension" % (model, vi.name), file=sys.stderr)
        sys.exit(1)
for n in m.graph.node:
    if all(i in inits for i in n.input):
        inits.update(n.output)
    if n.op_type not in ("Add", "Sub", "Relu", "Reshape", "Abs", "Neg", "Expand", "Cast"):
        print("zinc-compile: error: %s: node '%s' (%s): unsupported op" % (model, n.name, n.op_type), file=sys.stderr)
        sys.exit(1)
    if n.op_type in ("Reshape", "Expand") and n.input[1] not in inits:
        print("zinc-compile: error: %s: node '%s' (%s): cannot infer a static shape: input %s is not a constant" % (model, n.name, n.op_type, n.input[1]), file=sys.stderr)
        sys.exit(1)
    if n.op_type == "Neg":
        print("zinc-compile: error: internal error", file=sys.stderr)
        sys.exit(3)
json.dump({"model": model}, open(plan, "w"))
'''

FAKE_RUN = r'''#!/usr/bin/python3
import json, os, signal, sys, time
import numpy as np, onnx
from onnx import numpy_helper
sys.path.insert(0, os.environ["ST_LIB"])
import safetensors_io as st
args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if "=" in a)
assert args["backend"] == "cpu" and args["steps"] == "1"
m = onnx.load(json.load(open(sys.argv[1]))["model"])
env = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
inits = set(env)
if "data" in args:
    for k, v in st.load_file(args["data"]).items():
        assert v.shape[0] == 1, "no step dimension"
        env[k] = v[0]
for vi in m.graph.input:
    assert vi.name in env, "input %s not fed" % vi.name
    declared = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    if vi.name not in inits and list(env[vi.name].shape) != declared:  # as zinc-run
        print("zinc-run: error: tensor '%s' has shape %s, expected %s"
              % (vi.name, list(env[vi.name].shape), declared), file=sys.stderr)
        sys.exit(1)
for n in m.graph.node:
    x = [env[i] for i in n.input]
    if n.op_type == "Add": y = x[0] + x[1]
    elif n.op_type == "Sub": y = x[0] + x[1]          # wrong on purpose
    elif n.op_type == "Relu": y = np.maximum(x[0], 0).reshape(-1)  # wrong shape
    elif n.op_type == "Reshape": y = x[0].reshape(x[1])
    elif n.op_type == "Expand": y = x[0] * np.ones(x[1], x[0].dtype)
    elif n.op_type == "Cast":  # to=FLOAT gives float64: wrong on purpose
        y = x[0].astype(np.float64 if n.attribute[0].i == 1 else np.int64)
    elif n.op_type == "Abs":
        if x[0].size > 4: time.sleep(30)
        os.kill(os.getpid(), signal.SIGSEGV)
    env[n.output[0]] = y
st.save_file({o.name: env[o.name] for o in m.graph.output}, args["save-outputs"])
'''


def make_test(root, suite, name, nodes, inputs, outputs, feeds, expected,
              initializers=(), ir_version=8):
    d = os.path.join(root, suite, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = ir_version
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, values in (("input", feeds), ("output", expected)):
        for i, (n, v) in enumerate(values):
            t = numpy_helper.from_array(v, n)
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(t.SerializeToString())


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def make_fixture(tmp):
    """Stand-in tools and test data under `tmp`: (data root, build dir)."""
    root = os.path.join(tmp, "data")
    build = os.path.join(tmp, "build")
    os.makedirs(os.path.join(build, "tools"))
    for tool, text in (("zinc-compile", FAKE_COMPILE), ("zinc-run", FAKE_RUN)):
        path = os.path.join(build, "tools", tool)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 0.5, np.float32)
    make_test(root, "node", "test_add", [helper.make_node("Add", ["a", "b"], ["y"])],
              [vi("a", f32, [2, 3]), vi("b", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a), ("b", b)], [("y", a + b)])
    # An initializer listed as a graph input (IR 3 style) is not fed.
    make_test(root, "pytorch-converted", "test_add_weight",
              [helper.make_node("Add", ["a", "w"], ["y"])],
              [vi("a", f32, [2, 3]), vi("w", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a)], [("y", a + b)],
              initializers=[numpy_helper.from_array(b, "w")], ir_version=3)
    # Symbolic dims: the runner binds them to the data's shape.
    make_test(root, "node", "test_add_symbolic", [helper.make_node("Add", ["a", "b"], ["y"])],
              [vi("a", f32, ["n", 3]), vi("b", f32, [2, 3])], [vi("y", f32, ["n", 3])],
              [("a", a), ("b", b)], [("y", a + b)])
    # onnx 1.12's CastLike tests to and from bfloat16 declare `like`
    # with the input's shape [3,4] but store it as [1]: the data's shape
    # is what a backend runs on, so the runner binds the declaration to it.
    make_test(root, "node", "test_castlike_expanded",
              [helper.make_node("Add", ["a", "b"], ["y"])],
              [vi("a", f32, [2, 3]), vi("b", f32, [2, 3]), vi("like", f32, [2, 3])],
              [vi("y", f32, [2, 3])],
              [("a", a), ("b", b), ("like", np.zeros(1, np.float32))],
              [("y", a + b)])
    make_test(root, "node", "test_reshape", [helper.make_node("Reshape", ["x", "s"], ["y"])],
              [vi("x", f32, [2, 3]), vi("s", i64, [2])], [vi("y", f32, [3, 2])],
              [("x", a), ("s", np.array([3, 2], np.int64))], [("y", a.reshape(3, 2))])
    # A float shape input: only the all-initializers retry compiles it.
    make_test(root, "node", "test_expand_float",
              [helper.make_node("Cast", ["s"], ["si"], to=i64),
               helper.make_node("Expand", ["x", "si"], ["y"])],
              [vi("x", f32, [3]), vi("s", f32, [2])], [vi("y", f32, [2, 3])],
              [("x", a[0]), ("s", np.array([2, 3], np.float32))],
              [("y", np.tile(a[0], (2, 1)))])
    make_test(root, "node", "test_sub", [helper.make_node("Sub", ["a", "b"], ["y"])],
              [vi("a", f32, [2, 3]), vi("b", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a), ("b", b)], [("y", a - b)])
    make_test(root, "node", "test_relu", [helper.make_node("Relu", ["a"], ["y"])],
              [vi("a", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a)], [("y", a)])
    make_test(root, "node", "test_cast", [helper.make_node("Cast", ["a"], ["y"], to=f32)],
              [vi("a", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a)], [("y", a)])
    make_test(root, "node", "test_neg", [helper.make_node("Neg", ["a"], ["y"])],
              [vi("a", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a)], [("y", -a)])
    make_test(root, "node", "test_abs", [helper.make_node("Abs", ["a"], ["y"])],
              [vi("a", f32, [2])], [vi("y", f32, [2])],
              [("a", a[0, :2])], [("y", a[0, :2])])
    make_test(root, "node", "test_abs_slow", [helper.make_node("Abs", ["a"], ["y"])],
              [vi("a", f32, [2, 3])], [vi("y", f32, [2, 3])],
              [("a", a)], [("y", a)])
    # Uses only ops in Ops.def (Equal), refused: listed separately.
    make_test(root, "simple", "test_equal", [helper.make_node("Equal", ["a", "b"], ["y"])],
              [vi("a", f32, [2, 3]), vi("b", f32, [2, 3])],
              [vi("y", TensorProto.BOOL, [2, 3])],
              [("a", a), ("b", b)], [("y", a == b)])
    make_test(root, "simple", "test_foo", [helper.make_node("Foo", ["a"], ["y"])],
              [vi("a", f32, [2])], [vi("y", f32, [2])],
              [("a", a[0, :2])], [("y", a[0, :2])])
    return root, build


class RunnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root, cls.build = make_fixture(cls.tmp.name)
        root, build = cls.root, cls.build
        cls.json_path = os.path.join(cls.tmp.name, "out.json")
        env = dict(os.environ, ST_LIB=LIB)
        cls.proc = subprocess.run(
            [sys.executable, RUNNER, "--build-dir", build, "--data-root", root,
             "-j", "2", "--timeout", "8", "--json", cls.json_path, "--expect-clean",
             "--pass-list", ""],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)
        cls.out = cls.proc.stdout.decode()
        with open(cls.json_path) as f:
            cls.results = {r["name"]: r for r in json.load(f)["tests"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def status(self, name):
        return self.results[name]["status"], self.results[name]["reason"]

    def test_pass(self):
        self.assertEqual(self.status("node/test_add"), ("pass", ""), self.out)
        self.assertEqual(self.status("pytorch-converted/test_add_weight"), ("pass", ""))
        self.assertEqual(self.status("node/test_add_symbolic"), ("pass", ""))
        self.assertEqual(self.results["node/test_add_symbolic"]["inputs_bound_to_data_shape"],
                         ["a"])

    def test_declared_shape_disagreeing_with_data(self):
        self.assertEqual(self.status("node/test_castlike_expanded"), ("pass", ""), self.out)
        self.assertEqual(
            self.results["node/test_castlike_expanded"]["inputs_bound_to_data_shape"], ["like"])

    def test_integer_inputs_become_initializers(self):
        self.assertEqual(self.status("node/test_reshape"), ("pass", ""))
        self.assertFalse(self.results["node/test_reshape"]["all_inputs_as_initializers"])

    def test_static_shape_retry(self):
        self.assertEqual(self.status("node/test_expand_float"), ("pass", ""))
        self.assertTrue(self.results["node/test_expand_float"]["all_inputs_as_initializers"])

    def test_wrong_numbers(self):
        status, reason = self.status("node/test_sub")
        self.assertEqual(status, "fail")
        self.assertIn("6 of 6 elements differ, max abs error 1", reason)

    def test_wrong_shape_and_dtype(self):
        status, reason = self.status("node/test_relu")
        self.assertEqual(status, "fail")
        self.assertIn("shape [6], expected [2, 3]", reason)
        status, reason = self.status("node/test_cast")
        self.assertEqual(status, "fail")
        self.assertIn("dtype F64, expected F32", reason)

    def test_tool_error(self):
        self.assertEqual(self.status("node/test_neg"),
                         ("fail", "zinc-compile exit 3: zinc-compile: error: internal error"))

    def test_crash_and_timeout(self):
        status, reason = self.status("node/test_abs")
        self.assertEqual(status, "crash")
        self.assertIn("SIGSEGV", reason)
        self.assertEqual(self.status("node/test_abs_slow"),
                         ("crash", "zinc-run timed out"))

    def test_unsupported(self):
        status, reason = self.status("simple/test_foo")
        self.assertEqual(status, "unsupported")
        self.assertEqual(reason, "zinc-compile: error: model.onnx: node '' (Foo): unsupported op")

    def test_report(self):
        self.assertIn("conformance: 6 passed, 4 failed, 2 unsupported, 2 crashed\n", self.out)
        self.assertTrue(self.out.endswith(
            "conformance: 6 passed, 4 failed, 2 unsupported, 2 crashed\n"))
        self.assertEqual(self.proc.returncode, 1)  # --expect-clean
        refused = self.out[self.out.index("supported op refused"):].splitlines()
        self.assertEqual(len(refused), 3)
        self.assertIn("simple/test_equal [Equal]", refused[1])
        self.assertIn("FAIL        node/test_sub: output 'y'", self.out)
        self.assertNotIn("test_add", self.out)

    def test_filter_and_suite(self):
        proc = subprocess.run(
            [sys.executable, RUNNER, "--build-dir", self.build, "--data-root", self.root,
             "--suite", "node", "--filter", "test_(add|reshape)$", "--expect-clean",
             "--pass-list", ""],
            stdout=subprocess.PIPE, env=dict(os.environ, ST_LIB=LIB), timeout=60)
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(proc.stdout.decode(),
                         "conformance: 2 passed, 0 failed, 0 unsupported, 0 crashed\n")

    def test_missing_tools(self):
        proc = subprocess.run([sys.executable, RUNNER, "--build-dir", self.tmp.name],
                              stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn(b"zinc-compile not found", proc.stderr)


class PassListTest(unittest.TestCase):
    """--pass-list / --update-pass-list against the stand-in tools: each run
    selects a few tests of RunnerTest's data so that the pass list alone
    decides --expect-clean's verdict."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root, cls.build = make_fixture(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_with(self, listed, *args):
        """(returncode, stdout, the pass list file after the run)."""
        path = os.path.join(self.tmp.name, "pass_list.txt")
        if listed is None:
            if os.path.exists(path):
                os.remove(path)
        else:
            with open(path, "w") as f:
                f.write("".join(n + "\n" for n in listed))
        proc = subprocess.run(
            [sys.executable, RUNNER, "--build-dir", self.build, "--data-root",
             self.root, "--pass-list", path] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, ST_LIB=LIB), timeout=60)
        after = None
        if os.path.exists(path):
            with open(path) as f:
                after = f.read()
        return proc.returncode, proc.stdout.decode() + proc.stderr.decode(), after

    def test_listed_tests_passing_is_clean(self):
        # Listed tests outside the selection (another suite, the filter) are
        # not checked.
        rc, out, _ = self.run_with(
            ["node/test_add", "node/test_reshape", "node/test_sub", "simple/test_foo"],
            "--suite", "node", "--filter", "test_(add|reshape)$", "--expect-clean")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out, "conformance: 2 passed, 0 failed, 0 unsupported, 0 crashed\n")

    def test_listed_test_now_unsupported_fails(self):
        # Unsupported alone never fails --expect-clean; on the list it does.
        rc, out, _ = self.run_with(["node/test_add", "simple/test_foo"],
                                   "--filter", "test_(add|foo)$")
        self.assertEqual(rc, 0, out)
        rc, out, _ = self.run_with(["node/test_add", "simple/test_foo"],
                                   "--filter", "test_(add|foo)$", "--expect-clean")
        self.assertEqual(rc, 1, out)
        self.assertIn("pass list: 1 tests on ", out)
        self.assertIn("no longer pass: simple/test_foo (unsupported)\n", out)
        self.assertTrue(out.endswith(
            "conformance: 1 passed, 0 failed, 1 unsupported, 0 crashed\n"), out)

    def test_listed_test_failing_crashing_or_missing_is_named(self):
        rc, out, _ = self.run_with(
            ["node/test_abs", "node/test_gone", "node/test_sub"],
            "--suite", "node", "--filter", "test_(abs|gone|sub)$", "--expect-clean")
        self.assertEqual(rc, 1, out)
        self.assertIn("no longer pass: node/test_abs (crash), node/test_gone (missing), "
                      "node/test_sub (fail)\n", out)

    def test_new_pass_is_reported_not_failed(self):
        rc, out, after = self.run_with([], "--filter", "test_add$", "--expect-clean")
        self.assertEqual(rc, 0, out)
        self.assertIn("pass list: 1 tests pass but are not on ", out)
        self.assertIn("(run --update-pass-list to record them): node/test_add\n", out)
        self.assertEqual(after, "")  # only --update-pass-list writes it

    def test_update_keeps_unselected_entries(self):
        rc, out, after = self.run_with(
            ["simple/test_foo", "node/test_relu", "node/test_add"],
            "--filter", "test_(add|foo|reshape)$", "--update-pass-list")
        self.assertEqual(rc, 0, out)
        self.assertIn("updated (1 removed, 1 added)", out)
        # test_foo no longer passes: dropped; test_relu was not run: kept.
        self.assertEqual(after, "node/test_add\nnode/test_relu\nnode/test_reshape\n")
        rc, out, _ = self.run_with(None, "--filter", "test_add$", "--update-pass-list")
        self.assertEqual(rc, 0, out)

    def test_missing_pass_list(self):
        rc, out, _ = self.run_with(None, "--filter", "test_add$", "--expect-clean")
        self.assertEqual(rc, 2)
        self.assertIn("pass list", out)
        self.assertIn("not found (record one with --update-pass-list", out)

    def test_comments_and_blank_lines(self):
        sys.path.insert(0, HERE)
        import run_node_tests as r
        path = os.path.join(self.tmp.name, "commented.txt")
        with open(path, "w") as f:
            f.write("# recorded\n\nnode/test_add  # an add\nnode/test_sub\n")
        self.assertEqual(r.read_pass_list(path), {"node/test_add", "node/test_sub"})


class CompareTest(unittest.TestCase):
    def setUp(self):
        sys.path.insert(0, HERE)
        import run_node_tests
        self.r = run_node_tests

    def test_tolerance(self):
        e = np.array([1.0, 0.0, np.nan, np.inf, -2.0], np.float32)
        ok = np.array([1.0009, 5e-8, np.nan, np.inf, -2.001], np.float32)
        self.assertIsNone(self.r.compare("y", ok, e))
        for bad in ([1.0011, 0, np.nan, np.inf, -2], [1, 2e-7, np.nan, np.inf, -2],
                    [1, 0, 0, np.inf, -2], [1, 0, np.nan, -np.inf, -2],
                    [1, 0, np.nan, 1e30, -2]):
            self.assertIsNotNone(self.r.compare("y", np.array(bad, np.float32), e), bad)

    def test_integers_exact(self):
        e = np.array([3, -4], np.int64)
        self.assertIsNone(self.r.compare("y", e.copy(), e))
        self.assertIn("1 of 2 elements differ", self.r.compare("y", np.array([3, -5]), e))
        self.assertIn("dtype I32", self.r.compare("y", e.astype(np.int32), e))


if __name__ == "__main__":
    unittest.main()
