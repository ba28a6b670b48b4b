"""Delayed parameter update (--dpu) against the same plan without it.

Trains bench/nanogpt.py's gpt-25m (27.4M parameters) with fp32 AdamW whose
master weights and moments live in CPU memory, updated on the host
(--offload-optimizer=cpu --offload-params=none), at a small batch (default
1 x 16 tokens): the host's update of 27.4M parameters, and the copies of the
gradients and weights it needs, then take longer than the forward and
backward (the compile report says `host-bound`). That is the case DPU is
for: it runs the update of step i during the forward and backward of step
i+1, so the step costs about max(update, compute) instead of their sum.
(With the optimizer on NVMe the same model is NVMe-bound: the timed
prefetches already hide the update behind that traffic, and DPU, moving the
same bytes, has nothing to gain.)

Both plans are compiled from the same export and train on the same batches;
repetitions alternate between them. Reported: each plan's median measured
step seconds (zinc-run --metrics) over the timed steps of every repetition,
the speedup, the predicted steps (the compile reports' `predicted`), and the
largest relative difference between the two loss curves (DPU applies every
update one step late, so the curves differ by about one step's progress).

Run: /usr/bin/python3 bench/dpu_step.py --build-dir build [--dir /var/tmp/zinc-dpu]
       [--threads 1] [--batch 1 --seq 16] [--reps 5 --warmup 2 --steps 10]
Writes bench/results/dpu_step.json unless --out.
"""

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_nanogpt as tn  # noqa: E402
from machine_info import cpu_name, git_commit  # noqa: E402

MODEL = "gpt-25m"
FLAGS = ["--optimizer=adamw", "--offload-optimizer=cpu", "--offload-params=none"]


def prepare(c, work, steps):
    import nanogpt
    import safetensors_io as st
    onnx_path = os.path.join(work, MODEL + ".onnx")
    params = nanogpt.export(c, onnx_path)
    tokens, targets = nanogpt.make_data(c, steps)
    data = os.path.join(work, "data.safetensors")
    st.save_file({"tokens": tokens, "targets": targets}, data)
    return onnx_path, data, params


def compile_plan(build, c, onnx_path, work, dpu):
    name = "dpu" if dpu else "base"
    plan = os.path.join(work, name + ".zplan")
    report = os.path.join(work, name + ".json")
    argv = [os.path.join(build, "tools", "zinc-compile"), onnx_path, "-o", plan,
            "--report=" + report, "--dim", "batch=%d" % c.batch, "--dim", "seq=%d" % c.seq,
            "--lr=%g" % tn.LR] + FLAGS + (["--dpu"] if dpu else [])
    tn.run(argv)
    with open(report) as f:
        return plan, json.load(f)["predicted"]


def train_rep(build, plan, data, threads, steps, work):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    metrics = os.path.join(work, "metrics.jsonl")
    tn.run([os.path.join(build, "tools", "zinc-run"), plan, "--backend=cpu",
            "--steps=%d" % steps, "--data=" + data, "--metrics=" + metrics], env=env)
    with open(metrics) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                         os.path.join(tn.ROOT, "build")))
    p.add_argument("--dir", default="/var/tmp/zinc-dpu", help="where exports and plans go")
    p.add_argument("--threads", type=int, default=1,
                   help="OpenMP threads per stream (default 1: on a 2-core machine the "
                        "compute and host streams then each have a core, as a GPU "
                        "machine's host has while the GPU computes)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default=os.path.join(HERE, "results", "dpu_step.json"))
    args = p.parse_args()
    if min(args.warmup, args.steps, args.reps, args.batch, args.seq) < 1:
        p.error("--warmup, --steps, --reps, --batch and --seq must be at least 1")
    import nanogpt
    c = dataclasses.replace(nanogpt.CONFIGS[MODEL], batch=args.batch, seq=args.seq)
    work = os.path.join(args.dir, "work")
    os.makedirs(work, exist_ok=True)
    total = args.warmup + args.steps
    runs = {"base": [], "dpu": []}
    try:
        onnx_path, data, params = prepare(c, work, total)
        plans = {name: compile_plan(args.build_dir, c, onnx_path, work, name == "dpu")
                 for name in runs}
        for r in range(args.reps):
            for name in runs:
                steps = train_rep(args.build_dir, plans[name][0], data, args.threads, total,
                                  work)
                runs[name].append(steps)
                print("rep %d %s: %.3f s/step (median of timed steps)"
                      % (r, name, statistics.median(s["seconds"] for s in steps[args.warmup:])),
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    timed = {name: [s["seconds"] for rep in reps for s in rep[args.warmup:]]
             for name, reps in runs.items()}
    losses = {name: [s["loss"] for s in reps[0]] for name, reps in runs.items()}
    gap = max(abs(a - b) / abs(a) for a, b in zip(losses["base"], losses["dpu"]))
    summary = {
        "base_step_seconds": statistics.median(timed["base"]),
        "dpu_step_seconds": statistics.median(timed["dpu"]),
        "base_predicted_seconds": plans["base"][1]["step_seconds"],
        "dpu_predicted_seconds": plans["dpu"][1]["step_seconds"],
        "max_relative_loss_difference": gap,
    }
    summary["speedup"] = summary["base_step_seconds"] / summary["dpu_step_seconds"]
    result = {
        "benchmark": "dpu_step",
        "config": {"model": MODEL, "params": params, "batch": c.batch, "seq": c.seq,
                   "threads": args.threads, "warmup": args.warmup, "steps": args.steps,
                   "reps": args.reps, "dir": args.dir, "flags": " ".join(FLAGS)},
        "machine": {"cpu": cpu_name(), "nproc": os.cpu_count()},
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "summary": summary, "losses": losses,
        "reps": {name: [[s["seconds"] for s in rep] for rep in reps]
                 for name, reps in runs.items()},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("%s, batch %d x seq %d, optimizer on the host, %d threads"
          % (MODEL, c.batch, c.seq, args.threads))
    print("%-5s %12s %14s" % ("", "s/step", "predicted s"))
    for name in runs:
        print("%-5s %12.3f %14.3f" % (name, summary[name + "_step_seconds"],
                                       summary[name + "_predicted_seconds"]))
    print("speedup %.2fx; loss curves differ by at most %.1f%%"
          % (summary["speedup"], 100 * gap))
    print("JSON: " + args.out)


if __name__ == "__main__":
    main()
