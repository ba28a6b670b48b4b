"""Training throughput of the bundled GPT example: zinc (cpu backend) vs PyTorch.

Same model (examples/gpt/gpt.onnx and the PyTorch module it was exported
from, with the same weights), same batches (examples/gpt/data.safetensors,
step i feeding slice i mod 16), fp32, AdamW (lr 1e-3, PyTorch defaults), on
this machine in the same run, with the same thread count: OMP_NUM_THREADS if
set, else the CPUs this process may use. zinc gets it through OMP_NUM_THREADS
(OpenMP kernels, OpenBLAS), PyTorch through torch.set_num_threads.

Each repetition trains --warmup steps that are not timed, then --steps timed
steps: zinc as one `zinc-run PLAN --steps=W+N` process whose per-step
`seconds` (metrics.jsonl) are summed over the timed steps; PyTorch as a loop of
zero_grad/forward/backward/step timed with perf_counter. Steps/s of a
repetition = N / time; the result is the median over --reps repetitions, and
the ratio zinc/PyTorch (> 1: zinc is faster).

Prints a table and writes JSON (default bench/results/train_gpt.json).

Run: /usr/bin/python3 bench/train_gpt.py --build-dir build [--reps 5 --steps 20]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GPT_DIR = os.path.join(ROOT, "examples", "gpt")
sys.path.insert(0, GPT_DIR)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, HERE)
from machine_info import cpu_name, git_commit  # noqa: E402


def thread_count():
    env = os.environ.get("OMP_NUM_THREADS")
    if env:
        return int(env.split(",")[0])
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1






def run(argv, env=None):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if proc.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s" % (" ".join(argv), proc.returncode,
                                               proc.stderr.decode()[-4000:]))
    return proc


def bench_zinc(build, threads, warmup, steps, reps, work):
    compile_bin = os.path.join(build, "tools", "zinc-compile")
    run_bin = os.path.join(build, "tools", "zinc-run")
    plan = os.path.join(work, "gpt.zplan")
    run([compile_bin, os.path.join(GPT_DIR, "gpt.onnx"), "-o", plan, "--optimizer=adamw",
         "--lr=1e-3"])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    rates, walls, first_losses = [], [], []
    for r in range(reps):
        metrics = os.path.join(work, "metrics-%d.jsonl" % r)
        t0 = time.perf_counter()
        run([run_bin, plan, "--backend=cpu", "--steps=%d" % (warmup + steps),
             "--data=" + os.path.join(GPT_DIR, "data.safetensors"), "--metrics=" + metrics],
            env=env)
        walls.append(time.perf_counter() - t0)
        with open(metrics) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if len(lines) != warmup + steps:
            sys.exit("zinc-run wrote %d metrics lines, expected %d" % (len(lines), warmup + steps))
        first_losses.append(lines[0]["loss"])
        rates.append(steps / sum(m["seconds"] for m in lines[warmup:]))
    return {"steps_per_second": rates, "process_seconds": walls,
            "step0_loss": first_losses[0]}


def bench_torch(threads, warmup, steps, reps):
    import numpy as np
    import torch
    import export_gpt
    import safetensors_io as st

    torch.set_num_threads(threads)
    torch.manual_seed(export_gpt.SEED)  # the weights of gpt.onnx
    data = st.load_file(os.path.join(GPT_DIR, "data.safetensors"))
    n = data["tokens"].shape[0]
    batches = [(torch.from_numpy(np.ascontiguousarray(data["tokens"][i])),
                torch.from_numpy(np.ascontiguousarray(data["targets"][i]))) for i in range(n)]
    rates, first_losses = [], []
    for _ in range(reps):
        torch.manual_seed(export_gpt.SEED)
        model = export_gpt.GPT().train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(i):
            opt.zero_grad()
            loss = model(*batches[i % n])
            loss.backward()
            opt.step()
            return loss

        first_losses.append(float(step(0)))
        for i in range(1, warmup):
            step(i)
        t0 = time.perf_counter()
        for i in range(warmup, warmup + steps):
            step(i)
        rates.append(steps / (time.perf_counter() - t0))
    return {"steps_per_second": rates, "step0_loss": first_losses[0],
            "torch": torch.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                         os.path.join(ROOT, "build")))
    p.add_argument("--warmup", type=int, default=4, help="untimed steps per repetition")
    p.add_argument("--steps", type=int, default=16, help="timed steps per repetition")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default=os.path.join(HERE, "results", "train_gpt.json"))
    args = p.parse_args()
    if args.warmup < 1 or args.steps < 1 or args.reps < 1:
        p.error("--warmup, --steps and --reps must be at least 1")

    threads = thread_count()
    with tempfile.TemporaryDirectory(prefix="zinc-bench-") as work:
        # Interleave so that drift in machine load hits both sides alike.
        zinc = {"steps_per_second": [], "process_seconds": []}
        torch_res = {"steps_per_second": []}
        for _ in range(args.reps):
            z = bench_zinc(args.build_dir, threads, args.warmup, args.steps, 1, work)
            t = bench_torch(threads, args.warmup, args.steps, 1)
            zinc["steps_per_second"] += z["steps_per_second"]
            zinc["process_seconds"] += z["process_seconds"]
            zinc["step0_loss"] = z["step0_loss"]
            torch_res["steps_per_second"] += t["steps_per_second"]
            torch_res["step0_loss"] = t["step0_loss"]
            torch_res["torch"] = t["torch"]
    zinc["median_steps_per_second"] = statistics.median(zinc["steps_per_second"])
    torch_res["median_steps_per_second"] = statistics.median(torch_res["steps_per_second"])
    ratio = zinc["median_steps_per_second"] / torch_res["median_steps_per_second"]
    loss_rel = abs(zinc["step0_loss"] - torch_res["step0_loss"]) / abs(torch_res["step0_loss"])

    result = {
        "benchmark": "train_gpt",
        "model": "examples/gpt/gpt.onnx",
        "config": {"backend": "cpu", "precision": "fp32", "optimizer": "adamw", "lr": 1e-3,
                   "batch": 4, "seq": 32, "threads": threads, "warmup": args.warmup,
                   "steps": args.steps, "reps": args.reps},
        "machine": {"cpu": cpu_name(), "nproc": os.cpu_count(), "host": platform.node(),
                    "python": platform.python_version()},
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "zinc": zinc,
        "pytorch": torch_res,
        "ratio_zinc_over_pytorch": ratio,
        "step0_loss_rel_diff": loss_rel,
    }
    print("train_gpt: %s, %d threads, batch 4x32, fp32 AdamW, %d warm-up + %d timed steps, "
          "%d reps" % (result["machine"]["cpu"], threads, args.warmup, args.steps, args.reps))
    print("  zinc     %8.2f steps/s (median; reps %s)" % (
        zinc["median_steps_per_second"], " ".join("%.2f" % r for r in zinc["steps_per_second"])))
    print("  PyTorch  %8.2f steps/s (median; reps %s)" % (
        torch_res["median_steps_per_second"],
        " ".join("%.2f" % r for r in torch_res["steps_per_second"])))
    print("  ratio zinc/PyTorch: %.3f" % ratio)
    if loss_rel > 1e-4:
        print("  warning: step-0 losses differ (zinc %.6f, PyTorch %.6f): not the same model?"
              % (zinc["step0_loss"], torch_res["step0_loss"]), file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("  wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
