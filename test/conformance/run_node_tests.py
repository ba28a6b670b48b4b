#!/usr/bin/python3
"""Run ONNX's own backend tests (Debian's libonnx-testdata) through zinc.

Each test directory holds model.onnx and test_data_set_*/{input,output}_N.pb;
the N-th input file feeds the N-th graph input that is not an initializer, the
N-th output file is the expected N-th graph output. For every data set:

  zinc-compile MODEL --mode=infer -o PLAN
  zinc-run PLAN --backend=cpu --steps=1 --data=IN.safetensors --save-outputs=OUT.safetensors

IN.safetensors holds one tensor per remaining graph input, named like it, with a
leading step dimension of 1 (zinc-run's --data slices its first dimension per
step). OUT.safetensors is compared with the expected outputs at the tolerances
of onnx's backend tests: |got - expected| <= 1e-7 + 1e-3 * |expected| for
floats (NaN matches NaN, infinities must match exactly), exact equality for
integers and bools; dtypes and shapes must match.

Static shapes. zinc plans are static-shape: a shape must be known when the
plan is compiled. ONNX tests often pass shapes and other compile-time
arguments (Reshape's shape, Slice's starts, Expand's shape, TopK's k, ...) as
graph inputs. So before compiling, every input of integer type becomes an
initializer holding the test's data (removed from the graph inputs), which is
what an exporter does with such arguments in a real model. A few tests pass
such an argument as a float (Resize's scales, ConstantOfShape via a float
computation, ...): if zinc-compile then fails with a diagnostic saying it cannot
infer a static shape, the test is compiled once more with ALL inputs made
initializers. That second attempt still runs the op on the test's data (the
plan computes the outputs from initializers instead of fed inputs), so it
tests the kernel; only the data-feeding path is skipped, and only for tests
whose outputs' shapes depend on input values.

Classification per test (the worst over its data sets):
  pass         outputs match
  unsupported  zinc-compile exits 1 with a diagnostic containing "unsupported"
  fail         wrong numbers / shape / dtype, or any other zinc-compile or
               zinc-run error (exit status != 0, missing output)
  crash        a tool was killed by a signal or ran past --timeout

Pass list. test/conformance/pass_list.txt (--pass-list) names every test
that passed when it was last recorded, one `suite/test_name` a line, sorted;
`--update-pass-list` rewrites it from this run (entries for tests this run
did not select are kept). A listed test that this run selected and that is
now refused, failing, crashing or missing from the test data is a
regression: it is named, and fails an --expect-clean run, so zinc's support
can never silently shrink. A test that passes but is not listed is reported
(run --update-pass-list to record it) and fails nothing.

Output: one line per test that did not pass, with its reason; then the tests
refused as unsupported although every op they use is listed in
include/zinc/ops/Ops.def ("supported op refused", with the diagnostic, so
a reader can check it says why: a dtype, an attribute, ...); then the pass
list's regressions and newly passing tests; then the summary line
`conformance: P passed, F failed, U unsupported, C crashed`.
--json FILE writes every test's result.

Examples:
  test/conformance/run_node_tests.py --build-dir build --suite simple
  test/conformance/run_node_tests.py --filter 'test_(add|matmul)' -j 2 --json out.json
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import safetensors_io as st  # noqa: E402

DEFAULT_DATA_ROOT = "/usr/share/libonnx-testdata/data"
SUITES = ("node", "pytorch-converted", "simple")
OPS_DEF = os.path.join(ROOT, "include", "zinc", "ops", "Ops.def")
DEFAULT_PASS_LIST = os.path.join(HERE, "pass_list.txt")

RTOL = 1e-3
ATOL = 1e-7

# zinc-compile's diagnostic when a shape depends on an input's value.
STATIC_SHAPE_RE = re.compile(r"static shape", re.I)
UNSUPPORTED_RE = re.compile(r"unsupported", re.I)

# ONNX element types zinc can hold -> safetensors tag.
ONNX_TO_TAG = {
    TensorProto.FLOAT: "F32", TensorProto.UINT8: "U8", TensorProto.INT8: "I8",
    TensorProto.UINT16: "U16", TensorProto.INT16: "I16", TensorProto.INT32: "I32",
    TensorProto.INT64: "I64", TensorProto.BOOL: "BOOL", TensorProto.FLOAT16: "F16",
    TensorProto.DOUBLE: "F64", TensorProto.UINT32: "U32", TensorProto.UINT64: "U64",
    TensorProto.BFLOAT16: "BF16",
}
INTEGER_TYPES = {TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16,
                 TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
                 TensorProto.UINT32, TensorProto.UINT64}
FLOAT_TAGS = {"F16", "BF16", "F32", "F64"}

STATUS_ORDER = {"pass": 0, "unsupported": 1, "fail": 2, "crash": 3}

# Errata of the test data. libonnx-testdata (onnx 1.12) made the expected
# output of float -> bfloat16 casts by truncating the float's low 16 bits;
# later onnx releases (and PyTorch) round to nearest even, which is what the
# test compares against instead. Applied only while the shipped expectation
# is exactly the truncation of the input, so fixed test data is used as is.
BF16_TRUNCATION_ERRATA = {
    "node/test_cast_FLOAT_to_BFLOAT16",
    "node/test_castlike_FLOAT_to_BFLOAT16",
    "node/test_castlike_FLOAT_to_BFLOAT16_expanded",
}


class Outcome(Exception):
    """Ends a test early with a status and a reason."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Unfeedable(Exception):
    """A value zinc cannot hold (string, complex, sequence, optional, map)."""


def parse_ops_def(path=OPS_DEF):
    with open(path) as f:
        return set(re.findall(r"^\s*ZINC_OP\(\s*(\w+)\s*,", f.read(), re.M))


def graph_ops(graph, out=None):
    """(domain, op_type) of every node, subgraphs (If/Loop/Scan bodies) included."""
    out = set() if out is None else out
    for node in graph.node:
        out.add((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                graph_ops(attr.g, out)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    graph_ops(g, out)
    return out


def type_name(type_proto):
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return TensorProto.DataType.Name(type_proto.tensor_type.elem_type).lower()
    return kind or "undefined"


def numbered(files, prefix):
    """input_0.pb, input_1.pb, ..., input_10.pb in numeric order."""
    pat = re.compile(r"%s_(\d+)\.pb$" % prefix)
    keyed = [(int(pat.search(f).group(1)), f) for f in files if pat.search(f)]
    return [f for _, f in sorted(keyed)]


def read_tensor(path, value_info):
    """A test data file as (TensorProto, value) where value is an ndarray or
    st.BF16, typed as the graph declares it. Raises Unfeedable for values zinc
    cannot hold."""
    declared = value_info.type
    if declared.WhichOneof("value") != "tensor_type":
        raise Unfeedable("%r has type %s" % (value_info.name, type_name(declared)))
    t = onnx.load_tensor(path)
    elem = declared.tensor_type.elem_type
    # Old test data stores bfloat16 as UINT16 bit patterns.
    if elem == TensorProto.BFLOAT16 and t.data_type == TensorProto.UINT16:
        t.data_type = TensorProto.BFLOAT16
    if t.data_type not in ONNX_TO_TAG:
        raise Unfeedable("%r has type %s" % (
            value_info.name, TensorProto.DataType.Name(t.data_type).lower()))
    if t.data_type == TensorProto.BFLOAT16:
        if t.HasField("raw_data"):
            bits = np.frombuffer(t.raw_data, dtype="<u2")
        else:
            bits = np.asarray(t.int32_data, dtype=np.int64).astype(np.uint16)
        return t, st.BF16(bits.reshape(tuple(t.dims)).copy())
    arr = numpy_helper.to_array(t)
    return t, np.array(arr, dtype=arr.dtype.newbyteorder("="), copy=True)


def describe_index(shape, flat):
    return "[%s]" % ",".join(str(i) for i in np.unravel_index(flat, shape)) if shape else "[]"


def compare(name, got, expected):
    """None if got matches expected, else why not."""
    got_tag, exp_tag = st.dtype_tag(got), st.dtype_tag(expected)
    if got_tag != exp_tag:
        return "output %r: dtype %s, expected %s" % (name, got_tag, exp_tag)
    if tuple(got.shape) != tuple(expected.shape):
        return "output %r: shape %s, expected %s" % (
            name, list(got.shape), list(expected.shape))
    g, e = st.to_numpy(got), st.to_numpy(expected)
    if g.size == 0:
        return None
    if exp_tag in FLOAT_TAGS:
        g64, e64 = g.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            # An infinity must be matched exactly: inf - x <= rtol * inf is true.
            close = (np.abs(g64 - e64) <= ATOL + RTOL * np.abs(e64)) & np.isfinite(e64)
            ok = close | (g64 == e64) | (np.isnan(g64) & np.isnan(e64))
            err = np.abs(g64 - e64)
    else:
        ok = g == e
        err = np.abs(g.astype(np.float64) - e.astype(np.float64))
    if ok.all():
        return None
    bad = ~ok
    err = np.where(bad, np.nan_to_num(err, nan=np.inf, posinf=np.inf), 0.0)
    worst = int(np.argmax(err))
    return ("output %r: %d of %d elements differ, max abs error %.6g at %s "
            "(got %r, expected %r)" % (
                name, int(bad.sum()), bad.size, err.ravel()[worst],
                describe_index(g.shape, worst), g.ravel()[worst].item(),
                e.ravel()[worst].item()))


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def run_tool(argv, deadline, env):
    """(returncode, stdout, stderr); Outcome('crash') on a signal or timeout."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Outcome("crash", "timeout before %s" % os.path.basename(argv[0]))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise Outcome("crash", "%s timed out" % os.path.basename(argv[0]))
    out = out.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = "signal %d" % -proc.returncode
        diag = first_line(err)
        raise Outcome("crash", "%s killed by %s%s" % (
            os.path.basename(argv[0]), sig, ": " + diag if diag else ""))
    return proc.returncode, out, err


class Runner:
    def __init__(self, args, zinc_ops):
        self.args = args
        self.zinc_ops = zinc_ops
        self.compile_bin = os.path.join(args.build_dir, "tools", "zinc-compile")
        self.run_bin = os.path.join(args.build_dir, "tools", "zinc-run")
        self.env = dict(os.environ)
        # -j workers already fill the cores; keep each tool to one thread.
        if args.jobs > 1:
            self.env.setdefault("OMP_NUM_THREADS", "1")

    def run_test(self, suite, test_dir):
        name = "%s/%s" % (suite, os.path.basename(test_dir))
        start = time.monotonic()
        result = {"name": name, "suite": suite, "status": "pass", "reason": "",
                  "ops": [], "all_inputs_as_initializers": False}
        tmp = tempfile.mkdtemp(prefix="zinc-conf-")
        try:
            model = onnx.load(os.path.join(test_dir, "model.onnx"))
            ops = graph_ops(model.graph)
            result["ops"] = sorted("%s.%s" % o if o[0] else o[1] for o in ops)
            result["all_ops_listed"] = all(d == "" and op in self.zinc_ops
                                           for d, op in ops)
            data_sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
            if not data_sets:
                raise Outcome("fail", "no test_data_set_* directory")
            deadline = start + self.args.timeout
            worst = None
            for i, ds in enumerate(data_sets):
                try:
                    self.run_data_set(model, test_dir, ds, os.path.join(tmp, str(i)),
                                      deadline, result)
                except Outcome as o:
                    if worst is None or STATUS_ORDER[o.status] > STATUS_ORDER[worst.status]:
                        worst = o
                    if o.status == "crash":
                        break
            if worst is not None:
                raise worst
        except Outcome as o:
            result["status"], result["reason"] = o.status, o.reason
        except Exception as e:  # a bug of this script or unreadable test data
            result["status"] = "fail"
            result["reason"] = "runner error: %s: %s" % (type(e).__name__, e)
        finally:
            if self.args.keep_temps:
                result["temp_dir"] = tmp
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        result["seconds"] = round(time.monotonic() - start, 3)
        return result

    def build_model(self, model, feeds, bake_all):
        """The model with integer (or all) fed inputs turned into initializers.
        Returns (model, names still fed, fed inputs whose shape was rebound)."""
        m = onnx.ModelProto()
        m.CopyFrom(model)
        baked = [name for name, (proto, _, elem) in feeds.items()
                 if bake_all or elem in INTEGER_TYPES]
        rebound = []
        # A plan is compiled for the shapes it will be fed. The test data are
        # what an ONNX backend runs on, so a fed input's declared shape
        # (symbolic dims, or a few tests whose declared shape disagrees with
        # their data) is bound to its data's shape.
        for vi in m.graph.input:
            if vi.name in feeds and vi.name not in baked:
                shape = list(feeds[vi.name][1].shape)
                dims = vi.type.tensor_type.shape.dim
                if (not vi.type.tensor_type.HasField("shape") or len(dims) != len(shape)
                        or any(not d.HasField("dim_value") or d.dim_value != n
                               for d, n in zip(dims, shape))):
                    vi.type.tensor_type.shape.Clear()
                    for n in shape:
                        vi.type.tensor_type.shape.dim.add().dim_value = n
                    rebound.append(vi.name)
        if not baked:
            return m, list(feeds), rebound
        kept = [vi for vi in m.graph.input if vi.name not in baked]
        del m.graph.input[:]
        m.graph.input.extend(kept)
        for name in baked:
            t = TensorProto()
            t.CopyFrom(feeds[name][0])
            t.name = name
            m.graph.initializer.append(t)
        # Before IR 4 every initializer had to be a graph input too; from IR 4
        # on, an initializer that is not an input is a constant, which is the
        # point (its value may decide a shape).
        if m.ir_version < 4:
            m.ir_version = 4
        return m, [n for n in feeds if n not in baked], rebound

    def run_data_set(self, model, test_dir, ds, work, deadline, result):
        os.makedirs(work)
        init_names = {t.name for t in model.graph.initializer}
        graph_inputs = [vi for vi in model.graph.input if vi.name not in init_names]
        in_files = numbered(glob.glob(os.path.join(ds, "input_*.pb")), "input")
        out_files = numbered(glob.glob(os.path.join(ds, "output_*.pb")), "output")
        if len(in_files) > len(graph_inputs):
            raise Outcome("fail", "%d input files for %d graph inputs"
                          % (len(in_files), len(graph_inputs)))
        if len(out_files) != len(model.graph.output):
            raise Outcome("fail", "%d output files for %d graph outputs"
                          % (len(out_files), len(model.graph.output)))

        feeds = {}  # name -> (TensorProto, value, declared elem type)
        unfeedable = []
        for vi, path in zip(graph_inputs, in_files):
            try:
                proto, value = read_tensor(path, vi)
                feeds[vi.name] = (proto, value, vi.type.tensor_type.elem_type)
            except Unfeedable as u:
                unfeedable.append(str(u))

        plan = os.path.join(work, "plan.zplan")
        attempts = (False, True)
        for bake_all in attempts:
            m, fed, rebound = self.build_model(model, feeds, bake_all)
            if rebound:
                result["inputs_bound_to_data_shape"] = rebound
            if m == model:
                model_path = os.path.join(test_dir, "model.onnx")
            else:
                model_path = os.path.join(work, "model%s.onnx" % ("_all" if bake_all else ""))
                onnx.save(m, model_path)
            rc, _, err = run_tool([self.compile_bin, model_path, "--mode=infer",
                                   "-o", plan], deadline, self.env)
            if rc == 0:
                break
            diag = first_line(err).replace(os.path.dirname(model_path) + os.sep, "")
            if rc == 1 and UNSUPPORTED_RE.search(err):
                raise Outcome("unsupported", diag)
            if not bake_all and STATIC_SHAPE_RE.search(err) and fed:
                # See the module docstring: shapes that depend on float inputs.
                result["all_inputs_as_initializers"] = True
                continue
            raise Outcome("fail", "zinc-compile exit %d: %s" % (rc, diag))
        if not os.path.isfile(plan):
            raise Outcome("fail", "zinc-compile exited 0 but wrote no plan")
        if unfeedable:
            raise Outcome("fail", "zinc-compile accepted a model it cannot run: input "
                          + "; ".join(unfeedable))

        expected = {}
        for vi, path in zip(model.graph.output, out_files):
            try:
                expected[vi.name] = read_tensor(path, vi)[1]
            except Unfeedable as u:
                raise Outcome("fail", "zinc-compile accepted a model it cannot run: "
                              "output %s" % u)
        if result["name"] in BF16_TRUNCATION_ERRATA and len(expected) == 1 and feeds:
            source = next(iter(feeds.values()))[1]
            (out_name, shipped), = expected.items()
            if (isinstance(shipped, st.BF16) and isinstance(source, np.ndarray)
                    and source.dtype == np.float32 and source.shape == shipped.shape
                    and np.array_equal(shipped.bits,
                                       (source.view(np.uint32) >> 16).astype(np.uint16))):
                expected[out_name] = st.BF16(st.float32_to_bf16_bits(source))
                result["erratum"] = "bf16 expected by round-to-nearest-even, not truncation"

        argv = [self.run_bin, plan, "--backend=cpu", "--steps=1"]
        if fed:
            data = os.path.join(work, "inputs.safetensors")
            tensors = {}
            for n in fed:
                v = feeds[n][1]
                tensors[n] = st.BF16(v.bits[None]) if isinstance(v, st.BF16) else v[None]
            st.save_file(tensors, data)
            argv.append("--data=" + data)
        outputs = os.path.join(work, "outputs.safetensors")
        argv.append("--save-outputs=" + outputs)
        rc, _, err = run_tool(argv, deadline, self.env)
        if rc != 0:
            raise Outcome("fail", "zinc-run exit %d: %s" % (
                rc, first_line(err).replace(work + os.sep, "")))
        try:
            got = st.load_file(outputs)
        except (OSError, st.SafetensorsError) as e:
            raise Outcome("fail", "zinc-run --save-outputs: %s" % e)
        for name, exp in expected.items():
            if name not in got:
                raise Outcome("fail", "output %r missing from --save-outputs (has %s)"
                              % (name, sorted(got)))
            why = compare(name, got[name], exp)
            if why:
                raise Outcome("fail", why)


def read_pass_list(path):
    """The test names recorded in a pass list ('#' starts a comment)."""
    names = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.add(line)
    return names


def write_pass_list(path, names):
    with open(path, "w") as f:
        for name in sorted(names):
            f.write(name + "\n")


def selects(name, suites, pattern):
    """Whether a run over `suites` with `pattern` would run test `name`."""
    return (name.split("/", 1)[0] in suites
            and (pattern is None or pattern.search(name) is not None))


def check_pass_list(listed, results, suites, pattern):
    """Compares a run with the pass list. Returns (regressed, new):
    regressed: [(name, status)] of listed tests this run selected that did
    not pass (status "missing" when the test data has no such test);
    new: names that passed but are not listed."""
    by_name = {r["name"]: r["status"] for r in results}
    regressed = []
    for name in sorted(listed):
        if not selects(name, suites, pattern):
            continue
        status = by_name.get(name, "missing")
        if status != "pass":
            regressed.append((name, status))
    new = sorted(n for n, s in by_name.items() if s == "pass" and n not in listed)
    return regressed, new


def updated_pass_list(listed, results, suites, pattern):
    """The pass list after this run: what passed, plus the listed tests this
    run did not select."""
    kept = {n for n in listed if not selects(n, suites, pattern)}
    return kept | {r["name"] for r in results if r["status"] == "pass"}


def collect_tests(data_root, suites, pattern):
    tests = []
    for suite in suites:
        for d in sorted(glob.glob(os.path.join(data_root, suite, "*"))):
            if not os.path.isfile(os.path.join(d, "model.onnx")):
                continue
            full = "%s/%s" % (suite, os.path.basename(d))
            if pattern and not pattern.search(full):
                continue
            tests.append((suite, d))
    return tests


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default="./build",
                   help="build directory holding tools/zinc-compile and tools/zinc-run")
    p.add_argument("--filter", help="regex searched in 'suite/test_name'")
    p.add_argument("--suite", choices=SUITES + ("all",), default="all")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per test (compile and run together)")
    p.add_argument("--json", help="write per-test results to this file")
    p.add_argument("--expect-clean", action="store_true",
                   help="exit 1 if any test failed or crashed, or a test on the "
                        "pass list no longer passes")
    p.add_argument("--pass-list", default=DEFAULT_PASS_LIST,
                   help="the recorded passing tests (default: %(default)s); "
                        "'' for none")
    p.add_argument("--update-pass-list", action="store_true",
                   help="rewrite --pass-list from this run's passing tests")
    p.add_argument("--data-root", default=DEFAULT_DATA_ROOT,
                   help="libonnx-testdata's data directory")
    p.add_argument("--keep-temps", action="store_true",
                   help="keep each test's models, plans and safetensors files")
    p.add_argument("-v", "--verbose", action="store_true", help="print passing tests too")
    args = p.parse_args(argv)

    args.build_dir = os.path.abspath(args.build_dir)
    for tool in ("zinc-compile", "zinc-run"):
        path = os.path.join(args.build_dir, "tools", tool)
        if not os.access(path, os.X_OK):
            print("run_node_tests: error: %s not found (build it, or pass --build-dir)"
                  % path, file=sys.stderr)
            return 2
    if not os.path.isdir(args.data_root):
        print("run_node_tests: error: %s not found (apt install libonnx-testdata)"
              % args.data_root, file=sys.stderr)
        return 2
    suites = SUITES if args.suite == "all" else (args.suite,)
    pattern = re.compile(args.filter) if args.filter else None
    listed = set()
    if args.pass_list:
        if os.path.isfile(args.pass_list):
            listed = read_pass_list(args.pass_list)
        elif not args.update_pass_list:
            print("run_node_tests: error: pass list %s not found (record one with "
                  "--update-pass-list, or pass --pass-list '')" % args.pass_list,
                  file=sys.stderr)
            return 2
    elif args.update_pass_list:
        print("run_node_tests: error: --update-pass-list needs a --pass-list file",
              file=sys.stderr)
        return 2
    tests = collect_tests(args.data_root, suites, pattern)
    if not tests:
        print("run_node_tests: error: no test matches", file=sys.stderr)
        return 2

    runner = Runner(args, parse_ops_def())
    results = []
    tty = sys.stderr.isatty()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(runner.run_test, s, d) for s, d in tests]
        for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            results.append(fut.result())
            if tty:
                print("\r[%d/%d]" % (done, len(tests)), end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    results.sort(key=lambda r: r["name"])

    counts = {s: 0 for s in STATUS_ORDER}
    for r in results:
        counts[r["status"]] += 1
        if r["status"] != "pass":
            print("%-11s %s: %s" % (r["status"].upper(), r["name"], r["reason"]))
        elif args.verbose:
            print("PASS        %s" % r["name"])
    refused = [r for r in results if r["status"] == "unsupported" and r["all_ops_listed"]]
    if refused:
        print("supported op refused: %d tests use only ops listed in Ops.def; "
              "check that each diagnostic says why:" % len(refused))
        for r in refused:
            print("  %s [%s]: %s" % (r["name"], " ".join(r["ops"]), r["reason"]))
    regressed, new = [], []
    if args.pass_list:
        regressed, new = check_pass_list(listed, results, suites, pattern)
        if args.update_pass_list:
            write_pass_list(args.pass_list,
                            updated_pass_list(listed, results, suites, pattern))
            print("pass list: %s updated (%d removed, %d added)" % (
                args.pass_list, len(regressed), len(new)))
        else:
            if regressed:
                print("pass list: %d tests on %s no longer pass: %s" % (
                    len(regressed), args.pass_list,
                    ", ".join("%s (%s)" % r for r in regressed)))
            if new:
                print("pass list: %d tests pass but are not on %s (run "
                      "--update-pass-list to record them): %s" % (
                          len(new), args.pass_list, ", ".join(new)))
    summary = "conformance: %d passed, %d failed, %d unsupported, %d crashed" % (
        counts["pass"], counts["fail"], counts["unsupported"], counts["crash"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": {"passed": counts["pass"], "failed": counts["fail"],
                                   "unsupported": counts["unsupported"],
                                   "crashed": counts["crash"]},
                       "supported_op_refused": [r["name"] for r in refused],
                       "pass_list": {"file": args.pass_list,
                                     "regressed": [n for n, _ in regressed],
                                     "new": new},
                       "tests": results}, f, indent=1)
            f.write("\n")
    print(summary)
    if args.expect_clean and (counts["fail"] or counts["crash"]):
        return 1
    if args.expect_clean and regressed and not args.update_pass_list:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
