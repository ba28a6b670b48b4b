"""Gradient accumulation (--grad-accum=N) on an offloaded optimizer.

Trains bench/nanogpt.py's gpt-25m (27.4M parameters) with fp32 AdamW whose
master weights and moments live in CPU memory, updated on the host
(--offload-optimizer=cpu --offload-params=none), at a small micro-batch
(default 1 x 16 tokens), for N = 1, 2, 4 and 8 micro-batches per optimizer
step. The host's update of 27.4M parameters, and the copies of the weights
it refreshes, then cost more than a micro-batch's forward and backward; with
accumulation they are paid once per N micro-batches, so the time per sample
falls as N grows (the gradients still travel to the host every micro-batch,
where they are summed).

Each N is compiled from the same export and trains on the same micro-batches;
repetitions alternate between the N. Reported per N: the median measured
seconds per optimizer step (zinc-run --metrics) over the timed steps of every
repetition, the measured seconds per sample (step / (N x batch)), the
predicted seconds per step and per micro-batch and the predicted model FLOPs
utilization (the compile reports' `predicted`).

Run: /usr/bin/python3 bench/grad_accum.py --build-dir build [--dir /var/tmp/zinc-accum]
       [--threads 1] [--batch 1 --seq 16] [--accum 1,2,4,8] [--reps 3 --warmup 1 --steps 4]
Writes bench/results/grad_accum.json unless --out.
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


def prepare(c, work, micro_batches):
    import nanogpt
    import safetensors_io as st
    onnx_path = os.path.join(work, MODEL + ".onnx")
    params = nanogpt.export(c, onnx_path)
    tokens, targets = nanogpt.make_data(c, micro_batches)
    data = os.path.join(work, "data.safetensors")
    st.save_file({"tokens": tokens, "targets": targets}, data)
    return onnx_path, data, params


def compile_plan(build, c, onnx_path, work, accum):
    plan = os.path.join(work, "accum%d.zplan" % accum)
    report = os.path.join(work, "accum%d.json" % accum)
    tn.run([os.path.join(build, "tools", "zinc-compile"), onnx_path, "-o", plan,
            "--report=" + report, "--dim", "batch=%d" % c.batch, "--dim", "seq=%d" % c.seq,
            "--lr=%g" % tn.LR, "--grad-accum=%d" % accum] + FLAGS)
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
    p.add_argument("--dir", default="/var/tmp/zinc-accum", help="where exports and plans go")
    p.add_argument("--threads", type=int, default=1,
                   help="OpenMP threads per stream (default 1: on a 2-core machine the "
                        "compute and host streams then each have a core)")
    p.add_argument("--batch", type=int, default=1, help="rows per micro-batch")
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--accum", default="1,2,4,8", help="micro-batches per step to compare")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", default=os.path.join(HERE, "results", "grad_accum.json"))
    args = p.parse_args()
    accums = [int(x) for x in args.accum.split(",")]
    if min(accums + [args.warmup, args.steps, args.reps, args.batch, args.seq]) < 1:
        p.error("--accum, --warmup, --steps, --reps, --batch and --seq must be at least 1")
    import nanogpt
    c = dataclasses.replace(nanogpt.CONFIGS[MODEL], batch=args.batch, seq=args.seq)
    work = os.path.join(args.dir, "work")
    os.makedirs(work, exist_ok=True)
    total = args.warmup + args.steps
    runs = {n: [] for n in accums}
    try:
        onnx_path, data, params = prepare(c, work, total * max(accums))
        plans = {n: compile_plan(args.build_dir, c, onnx_path, work, n) for n in accums}
        for r in range(args.reps):
            for n in accums:
                steps = train_rep(args.build_dir, plans[n][0], data, args.threads, total, work)
                runs[n].append(steps)
                print("rep %d N=%d: %.3f s/step (median of timed steps)"
                      % (r, n, statistics.median(s["seconds"] for s in steps[args.warmup:])),
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for n in accums:
        step = statistics.median(s["seconds"] for rep in runs[n] for s in rep[args.warmup:])
        predicted = plans[n][1]
        rows.append({
            "micro_batches": n,
            "step_seconds": step,
            "sample_seconds": step / (n * c.batch),
            "predicted_step_seconds": predicted["step_seconds"],
            "predicted_sample_seconds": predicted["micro_batch_seconds"] / c.batch,
            "predicted_model_flops_utilization": predicted["model_flops_utilization"],
            "losses": [s["loss"] for s in runs[n][0]],
        })
    result = {
        "benchmark": "grad_accum",
        "config": {"model": MODEL, "params": params, "batch": c.batch, "seq": c.seq,
                   "threads": args.threads, "warmup": args.warmup, "steps": args.steps,
                   "reps": args.reps, "dir": args.dir, "flags": " ".join(FLAGS)},
        "machine": {"cpu": cpu_name(), "nproc": os.cpu_count()},
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rows": rows,
        "reps": {str(n): [[s["seconds"] for s in rep] for rep in reps]
                 for n, reps in runs.items()},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("%s, micro-batch %d x seq %d, optimizer on the host, %d threads"
          % (MODEL, c.batch, c.seq, args.threads))
    print("%3s %10s %12s %14s %16s %6s" % ("N", "s/step", "s/sample", "predicted s/step",
                                            "predicted s/sample", "MFU"))
    for r in rows:
        print("%3d %10.3f %12.4f %14.3f %16.4f %6.3f"
              % (r["micro_batches"], r["step_seconds"], r["sample_seconds"],
                 r["predicted_step_seconds"], r["predicted_sample_seconds"],
                 r["predicted_model_flops_utilization"]))
    print("JSON: " + args.out)


if __name__ == "__main__":
    main()
