"""Compile time and peak memory of zinc-compile on shape-only GPT models.

Generates (bench/shape_gpt.py) GPT-3-style training graphs whose float
initializers are external data in a file that does not exist, compiles each
with `zinc-compile MODEL -o PLAN` in training mode (fp32, AdamW) under one
set of budgets (--budget, see BUDGETS below: optimizer states and parameters
offloaded to NVMe, so every model, the 1T one included, plans on one rank),
and measures:

  seconds       wall clock from spawn to exit of zinc-compile
  cpu_seconds   its user + system time (os.wait4), less sensitive to a busy machine
  peak_rss_mib  its peak resident set (ru_maxrss of the child)

Models (`--list` prints them with their parameter and node counts):
  gpt-1.3b .. gpt-1t   GPT-3 sizes at batch 1 (--batch) x 2048 tokens, vocab 50257
                       (1T: ZeRO-Infinity's 128 layers x d_model 25600)
  nodes-100k           a deep, narrow GPT (d_model 64, 2941 layers) whose ONNX
                       forward graph has 100,000 nodes or more (Constant nodes
                       included); nodes-10k the same at 10,000 nodes
  layers-N             d_model 1024, 16 heads, batch 1 x 512 tokens, N layers:
                       the series whose seconds are fitted to a * N^k (least
                       squares on log-log); the script prints k, and the k that
                       N log N itself fits to over the same N, for comparison

A compile that runs past --timeout is killed and recorded as "timeout"; one
that fails records the last line of its stderr. From each plan it reads (its
protobuf, without zinc's libraries) the instruction and tensor counts and
each tier's proven peak. With --time-passes zinc-compile also times its
passes; the pass report (and, with compilers that time them, the phases
around the passes: import, emit, the plan verifier, writing) are parsed into
the JSON.

Prints a table and writes JSON (default bench/results/compile_scale.json, or
compile_scale-no-spill.json for that budget).

Exit status 1 when any compile failed or timed out.

Run: /usr/bin/python3 bench/compile_scale.py --build-dir build [--timeout 600]
        [--budget a100-80g|no-spill|v100-fp16|dgx2-zero3] [--ranks N]
        [--only gpt-1t,nodes-100k] [--time-passes]
        [--quick] [--batch N] [--dpu] [--bucket-bytes SIZE] [--list] [--out FILE]
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import shape_gpt  # noqa: E402
from machine_info import cpu_name, git_commit  # noqa: E402

# One set of budgets for every model (--budget picks it). a100-80g: a DGX
# A100 GPU (80 GiB), with host memory and NVMe large enough for the 1T
# model's states (16 TB of fp32 params, grads and Adam moments) and the host
# staging buffers zinc plans for them; optimizer states, master weights and
# parameters live on NVMe, so every model has to offload, and activations
# that do not fit in 80 GiB are spilled or recomputed by allocate. no-spill:
# the same with a GPU tier so large that no activation is ever spilled, so
# the allocator's spill loop is out of the measurement.
OFFLOAD = ["--hw=dgx-a100-80g", "--cpu-mem=64TB", "--nvme-mem=64TB",
           "--offload-optimizer=nvme", "--offload-params=nvme"]
# v100-fp16: issue 10's setting for the largest models on one GPU: a
# DGX-2 V100 (32 GiB, 96 GiB of host memory per GPU), fp16 with Adam,
# optimizer states and parameters on NVMe, 4 TB of it; tiling and
# activation checkpointing are the compiler's (auto).
V100_FP16 = ["--hw=dgx2-v100", "--nvme-mem=4TB", "--precision=fp16", "--optimizer=adam",
             "--offload-optimizer=nvme", "--offload-params=nvme"]
# dgx2-zero3: issue 11's setting: DGX-2 V100 ranks (the preset's per-GPU
# share of host memory and NVMe), fp16 with Adam, ZeRO stage 3 with the
# optimizer states and parameters on NVMe; --ranks says how many (16: one
# DGX-2; the report is per rank).
DGX2_ZERO3 = ["--hw=dgx2-v100", "--precision=fp16", "--optimizer=adam", "--zero-stage=3",
              "--offload-optimizer=nvme", "--offload-params=nvme"]
BUDGETS = {"a100-80g": OFFLOAD, "no-spill": OFFLOAD + ["--gpu-mem=64TB"],
           "v100-fp16": V100_FP16, "dgx2-zero3": DGX2_ZERO3}
FLAGS = BUDGETS["a100-80g"]

SCALING_LAYERS = [8, 16, 32, 64, 128, 256]


def models(quick=False, batch=1):
    """(kind, Config) in the order they are compiled: small to large; the
    GPT-3 sizes at `batch` sequences per rank."""
    C = shape_gpt.Config
    if quick:
        out = [("layers", C("layers-%d" % n, n, 64, 4, seq=32, vocab=64)) for n in (2, 4, 8)]
        out.append(("gpt", C("gpt-tiny", 2, 128, 4, seq=64, vocab=512)))
        out.append(("nodes", C("nodes-1k", shape_gpt.layers_for_nodes(1000), 32, 2, seq=16,
                               vocab=64)))
        return out
    out = [("layers", C("layers-%d" % n, n, 1024, 16, seq=512)) for n in SCALING_LAYERS]
    out += [("gpt", C("gpt-1.3b", 24, 2048, 16, batch=batch)),
            ("gpt", C("gpt-6.7b", 32, 4096, 32, batch=batch)),
            ("gpt", C("gpt-13b", 40, 5120, 40, batch=batch)),
            ("gpt", C("gpt-175b", 96, 12288, 96, batch=batch)),
            ("gpt", C("gpt-1t", 128, 25600, 160, batch=batch)),
            # Two layers 65536 wide: one weight (64K x 256K, 32 GiB in
            # fp16) is bigger than a V100; only tiling fits it.
            ("gpt", C("wide-65536", 2, 65536, 64))]
    out += [("nodes", C("nodes-%dk" % (n // 1000), shape_gpt.layers_for_nodes(n), 64, 4,
                        seq=64, vocab=256)) for n in (10000, 100000)]
    return out


# The depth series (--depth-series): GPTs 256 wide (4 heads, 2048 tokens, batch 1,
# GPT-3's vocabulary) from 25 to 1000 layers, about 100 training nodes a layer, so
# the deepest is a 10^5-node graph; fitted like the layers-N series.
DEPTH_SERIES = [25, 50, 100, 200, 400, 1000]


def depth_series():
    C = shape_gpt.Config
    return [("layers", C("depth-%d" % n, n, 256, 4)) for n in DEPTH_SERIES]


def on_request(batch=1):
    """Models compiled only when --only names them: a run of them takes minutes."""
    C = shape_gpt.Config
    # 32T parameters: 400 layers x d_model 81920 (640 heads of 128).
    return [("gpt", C("gpt-32t", 400, 81920, 640, batch=batch))]






def loadavg():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


# -- Reading the plan ------------------------------------------------------
# The binary plan (plan/PlanFile.cpp) is a 32-byte header (magic, version,
# flags, payload size, checksum) and the zinc.plan.Plan message
# (include/zinc/plan/Plan.proto): tensors = 5, instructions = 6, tiers = 10
# (TierInfo: tier = 1, capacity = 2, peak = 3).
PLAN_HEADER = 32
TIER_NAMES = {0: "gpu", 1: "cpu", 2: "nvme"}


def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf, start=0, end=None):
    """(field number, wire type, value or (begin, end) of its bytes)."""
    i, end = start, len(buf) if end is None else end
    while i < end:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield field, wire, value
        elif wire == 2:
            n, i = _varint(buf, i)
            yield field, wire, (i, i + n)
            i += n
        elif wire == 1:
            yield field, wire, buf[i:i + 8]
            i += 8
        elif wire == 5:
            yield field, wire, buf[i:i + 4]
            i += 4
        else:
            raise ValueError("unexpected wire type %d in plan" % wire)


def plan_stats(path):
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != b"ZINCPLAN":
        raise ValueError("%s: not a binary zinc plan" % path)
    stats = {"bytes": len(buf), "tensors": 0, "instructions": 0, "tiers": {}}
    for field, wire, value in _fields(buf, PLAN_HEADER):
        if field == 5 and wire == 2:
            stats["tensors"] += 1
        elif field == 6 and wire == 2:
            stats["instructions"] += 1
        elif field == 10 and wire == 2:
            info = {1: 0, 2: 0, 3: 0}
            for f, w, v in _fields(buf, *value):
                if w == 0 and f in info:
                    info[f] = v
            stats["tiers"][TIER_NAMES.get(info[1], str(info[1]))] = {
                "capacity": info[2], "peak": info[3]}
    return stats


# -- --time-passes reports ---------------------------------------------------
_TIMING_ROW = re.compile(r"^\s*(?:[0-9.]+ \(\s*[0-9.]+%\)\s+)+(?P<name>\S.*?)\s*$")
_WALL = re.compile(r"([0-9.]+) \(\s*[0-9.]+%\)")


def parse_time_passes(stderr):
    """Sums the wall seconds per pass over every report llvm's TimerGroup
    printed (the last column of each row is the wall time)."""
    passes, phases, reports = {}, {}, 0
    current = None  # the dict the report being read goes to
    for line in stderr.splitlines():
        if "pass execution timing report" in line:
            reports += 1
            current = passes
            continue
        if "zinc-compile phases" in line:  # import, emit, plan verifier, writing
            current = phases
            continue
        if current is None:
            continue
        m = _TIMING_ROW.match(line)
        if not m:
            continue
        name = m.group("name")
        wall = float(_WALL.findall(line)[-1])
        if name == "Total":
            if current is passes:
                passes["(total of the reports)"] = passes.get("(total of the reports)", 0.0) + wall
            current = None
            continue
        current[name] = current.get(name, 0.0) + wall
    by_time = lambda d: dict(sorted(d.items(), key=lambda kv: -kv[1]))
    return {"reports": reports, "wall_seconds": by_time(passes), "phases": by_time(phases)}


# -- Running one compile -----------------------------------------------------
def run_compile(argv, timeout):
    """Runs argv; returns (status, wall s, cpu s, peak RSS KiB, exit code, stderr)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    if timed_out.is_set():
        state = "timeout"
    elif proc.returncode != 0:
        state = "failed"
    else:
        state = "ok"
    return state, wall, cpu, usage.ru_maxrss, proc.returncode, stderr


def last_error_line(stderr):
    lines = [l for l in stderr.splitlines() if l.strip()]
    for l in reversed(lines):
        if "error" in l:
            return l
    return lines[-1] if lines else ""


def report_summary(path):
    """What the compile report says the compiler chose: the proven peak of
    each tier, the tiled operators, the activation checkpointing, and the
    bytes the plan moves per step on each link (a prediction)."""
    with open(path) as f:
        rep = json.load(f)
    ac = dict(rep.get("activation_checkpointing", {}))
    ac["checkpoints"] = len(ac.get("checkpoints", []))
    return {"tiers": {t: v["peak"] for t, v in rep["per_rank"]["tiers"].items()},
            "ranks": rep["config"]["ranks"],
            "zero_stage": rep["config"]["zero_stage"],
            "model_states_bytes": rep["per_rank"]["model_states_bytes"],
            "predicted_collective_bytes_per_step":
                rep.get("predicted_collective_bytes_per_step", {}),
            "tiling": rep.get("tiling", []),
            "activation_checkpointing": ac,
            "predicted_transfer_bytes_per_step": rep.get("predicted_transfer_bytes_per_step", {}),
            "predicted": rep.get("predicted", {})}


def bench_one(compiler, flags, kind, cfg, work, timeout, time_passes, keep):
    model_dir = os.path.join(work, cfg.name)
    os.makedirs(model_dir, exist_ok=True)
    model = os.path.join(model_dir, "model.onnx")
    plan = os.path.join(model_dir, "plan.zplan")
    t0 = time.perf_counter()
    shape_gpt.write_model(cfg, model)
    gen_seconds = time.perf_counter() - t0
    report = os.path.join(model_dir, "report.json")
    argv = [compiler, model, "-o", plan, "--report=" + report] + flags + (
        ["--time-passes"] if time_passes else [])
    state, wall, cpu, rss, code, stderr = run_compile(argv, timeout)
    row = {"name": cfg.name, "kind": kind, "config": cfg.as_dict(),
           "model_bytes": os.path.getsize(model), "generate_seconds": round(gen_seconds, 3),
           "status": state, "exit_code": code, "seconds": round(wall, 3),
           "cpu_seconds": round(cpu, 3), "peak_rss_kib": rss,
           "peak_rss_mib": round(rss / 1024.0, 1)}
    if state == "failed":
        row["error"] = last_error_line(stderr)
        if code < 0:  # Not our timeout: something else killed it.
            row["error"] = "killed by %s; stderr ended: %s" % (
                signal.Signals(-code).name, row["error"])
    if state == "ok":
        row["plan"] = plan_stats(plan)
        row["report"] = report_summary(report)
        if "does not exist" not in stderr:
            row["warning"] = "zinc-compile did not warn about the missing weights"
    if time_passes:
        row["time_passes"] = parse_time_passes(stderr)
        if state == "ok":
            # Import, the text clone of each placement attempt, emit, the
            # plan verifier and writing the plan.
            row["time_passes"]["outside_passes_seconds"] = round(
                wall - row["time_passes"]["wall_seconds"].get("(total of the reports)", 0.0), 3)
    if not keep:
        shutil.rmtree(model_dir, ignore_errors=True)
    return row


# -- Fitting -------------------------------------------------------------
def loglog_slope(xs, ys):
    """Least-squares k of log y = log a + k log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly))
    return sxy / sxx


def scaling_fit(rows):
    ok = [r for r in rows if r["kind"] == "layers" and r["status"] == "ok"]
    if len(ok) < 2:
        return None
    layers = [r["config"]["layers"] for r in ok]
    fit = {"layers": layers, "seconds": [r["seconds"] for r in ok],
           "cpu_seconds": [r["cpu_seconds"] for r in ok],
           "exponent": round(loglog_slope(layers, [r["seconds"] for r in ok]), 3),
           "cpu_exponent": round(loglog_slope(layers, [max(r["cpu_seconds"], 1e-3)
                                                        for r in ok]), 3),
           "nlogn_exponent": round(loglog_slope(layers, [n * math.log(n) for n in layers]), 3),
           "rss_exponent": round(loglog_slope(layers, [r["peak_rss_kib"] for r in ok]), 3),
           # Slope between neighbours: start-up costs flatten the small end,
           # so the last one says more about how the compiler grows.
           "local_exponents": [round(loglog_slope(layers[i:i + 2],
                                                  [r["seconds"] for r in ok[i:i + 2]]), 2)
                               for i in range(len(ok) - 1)]}
    skipped = [r["name"] for r in rows if r["kind"] == "layers" and r["status"] != "ok"]
    if skipped:
        fit["left_out"] = skipped
    return fit


# The compile-time goals (issue 33), each a row's name, the ranks it is planned
# for (1 or more than 1), a limit of seconds and of peak RSS in GiB (None: none).
GOALS = [
    ("nodes-100k", 1, 10, None),
    ("depth-1000", 1, 10, 1),
    ("gpt-1t", 1, 10, 1),
    ("gpt-1t", "many", 60, 2),
    ("gpt-32t", "many", 60, None),
]


def targets(rows, fit, ranks=1):
    """Each goal of GOALS that a row of this run answers: met or not."""
    by = {r["name"]: r for r in rows}
    out = {}
    for name, goal_ranks, seconds, gib in GOALS:
        if name not in by or (goal_ranks == 1) != (ranks <= 1):
            continue
        r = by[name]
        ok = r["status"] == "ok"
        where = "" if ranks <= 1 else " at %d ranks" % ranks
        out["%s%s under %g s" % (name, where, seconds)] = ok and r["seconds"] < seconds
        if gib is not None:
            out["%s%s under %g GiB" % (name, where, gib)] = (
                ok and r["peak_rss_kib"] < gib * 1024 * 1024)
    if fit:
        out["seconds grow no faster than N log N"] = fit["exponent"] <= fit["nlogn_exponent"]
    return out


def fmt_row(r):
    plan = r.get("plan", {})
    status = r["status"] if r["status"] != "failed" else "failed: " + r.get("error", "")[:60]
    return "%-11s %17s %8d %9.2f %9.2f %9.1f %9s  %s" % (
        r["name"], "{:,}".format(r["config"]["params"]), r["config"]["onnx_nodes"],
        r["seconds"], r["cpu_seconds"], r["peak_rss_mib"],
        plan.get("instructions", "-"), status)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", help="JSON path (default bench/results/compile_scale.json, "
                    "compile_scale-no-spill.json with --budget=no-spill)")
    ap.add_argument("--budget", choices=sorted(BUDGETS), default="a100-80g",
                    help="the memory budgets every model compiles under (default a100-80g)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per compile")
    ap.add_argument("--ranks", type=int, default=1,
                    help="data-parallel ranks to plan for (zinc-compile --ranks)")
    ap.add_argument("--only", action="append", default=[],
                    help="model name(s), comma separated or repeated")
    ap.add_argument("--quick", action="store_true", help="tiny models only (a smoke test)")
    ap.add_argument("--dpu", action="store_true",
                    help="compile with --dpu (delayed parameter update)")
    ap.add_argument("--bucket-bytes",
                    help="zinc-compile --bucket-bytes (default: the cost model chooses; 0: "
                         "one tensor to each collective)")
    ap.add_argument("--compile-flag", action="append", default=[],
                    help="another zinc-compile flag, e.g. --compile-flag=--reorder-compute=false "
                         "(repeatable)")
    ap.add_argument("--batch", type=int, default=1,
                    help="sequences of 2048 tokens per rank for the GPT-3 sizes (default 1)")
    ap.add_argument("--time-passes", action="store_true",
                    help="pass --time-passes and record the per-pass wall seconds")
    ap.add_argument("--work-dir", help="where models and plans go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the models and plans")
    ap.add_argument("--depth-series", action="store_true",
                    help="compile the depth series instead (256 wide, %s layers)" %
                         ",".join(map(str, DEPTH_SERIES)))
    ap.add_argument("--list", action="store_true", help="print the models and exit")

    args = ap.parse_args(argv)

    todo = depth_series() if args.depth_series else models(args.quick, args.batch)
    if args.list:
        for kind, c in todo + on_request(args.batch):
            print("%-11s %-6s %4d layers, d_model %5d heads %3d seq %4d vocab %5d: "
                  "%s params, %d ONNX nodes" % (c.name, kind, c.layers, c.d_model, c.heads,
                                                c.seq, c.vocab, "{:,}".format(
                                                    shape_gpt.param_count(c)),
                                                shape_gpt.node_count(c)))
        return 0
    only = {n for o in args.only for n in o.split(",") if n}
    if only:
        todo += [(k, c) for k, c in on_request(args.batch) if c.name in only]
        unknown = only - {c.name for _, c in todo}
        if unknown:
            sys.exit("compile_scale: unknown model(s) %s (see --list)" % ", ".join(sorted(unknown)))
        todo = [(k, c) for k, c in todo if c.name in only]
    compiler = os.path.join(args.build_dir, "tools", "zinc-compile")
    if not os.access(compiler, os.X_OK):
        sys.exit("compile_scale: %s not found: build it first "
                 "(cmake --build %s --target zinc-compile)" % (compiler, args.build_dir))

    work = args.work_dir or tempfile.mkdtemp(prefix="zinc-compile-scale-")
    os.makedirs(work, exist_ok=True)
    flags = BUDGETS[args.budget] + (["--ranks=%d" % args.ranks] if args.ranks > 1 else [])
    if args.dpu:
        flags.append("--dpu")
    if args.bucket_bytes is not None:
        flags.append("--bucket-bytes=" + args.bucket_bytes)
    flags += args.compile_flag
    if not args.out:
        args.out = os.path.join(HERE, "results", "compile_scale%s%s.json" % (
            "" if args.budget == "a100-80g" else "-" + args.budget,
            "-%dranks" % args.ranks if args.ranks > 1 else ""))
    print("budget %s: zinc-compile %s; timeout %gs per compile" % (
        args.budget, " ".join(flags), args.timeout))
    print("%-11s %17s %8s %9s %9s %9s %9s  %s" % (
        "model", "params", "nodes", "seconds", "cpu s", "RSS MiB", "instrs", "status"))
    rows = []
    load_before = loadavg()
    try:
        for kind, cfg in todo:
            row = bench_one(compiler, flags, kind, cfg, work, args.timeout, args.time_passes,
                            args.keep)
            rows.append(row)
            print(fmt_row(row), flush=True)
    finally:
        if not args.work_dir and not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    fit = scaling_fit(rows)
    if fit:
        print("layer scaling (%s layers): seconds ~ layers^%.2f (cpu seconds ^%.2f, peak RSS "
              "^%.2f); N log N over these N fits ^%.2f; between neighbours: %s" % (
                  ",".join(map(str, fit["layers"])), fit["exponent"], fit["cpu_exponent"],
                  fit["rss_exponent"], fit["nlogn_exponent"],
                  " ".join("%.2f" % k for k in fit["local_exponents"])))
    goals = targets(rows, fit, args.ranks)
    for goal, met in goals.items():
        print("target %-40s %s" % (goal + ":", "met" if met else "NOT met"))
    if args.time_passes:
        for r in rows:
            tp = r.get("time_passes")
            if not tp:
                continue
            total = tp["wall_seconds"].get("(total of the reports)", 0.0)
            print("%s: %d pass timing reports, %.2f s in passes of %.2f s (%.2f s outside "
                  "them)" % (r["name"], tp["reports"], total, r["seconds"],
                             tp.get("outside_passes_seconds", float("nan"))))
            for name, s in tp["wall_seconds"].items():
                if name != "(total of the reports)":
                    print("  %8.3f s  %s" % (s, name))

    result = {
        "benchmark": "compile_scale",
        "budget": args.budget, "flags": flags, "timeout_seconds": args.timeout, "quick": args.quick,
        "time_passes": args.time_passes,
        "machine": {"cpu": cpu_name(), "nproc": os.cpu_count(), "host": platform.node(),
                    "python": platform.python_version(), "loadavg_before": load_before,
                    "loadavg_after": loadavg()},
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "zinc_compile": os.path.abspath(compiler),
        "results": rows, "scaling": fit, "targets": goals,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("wrote %s" % args.out)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
