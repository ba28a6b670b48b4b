"""NVMe traffic of a real offloaded training step against the tier's engine.

Trains bench/nanogpt.py's gpt-25m (27.4M parameters, batch 8 x seq 256) with
fp32 AdamW whose master weights and moments live on NVMe
(--offload-optimizer=nvme --offload-params=cpu: 314 MiB of optimizer state,
read and written back every step), on the cpu backend, with the tier in
--dir (a disk, not tmpfs). Each repetition is one zinc-run of --warmup +
--steps steps; the figures are read from its --metrics: per step and
direction, the bytes the tier moved and the seconds during which a request of
that direction was in the kernel (measured on the tier's I/O thread), so
bytes / busy seconds is the rate the step got from the device.

In the same run, alternating with the training repetitions, zinc-bench-nvme
measures the engine's sequential rate on the same directory (1 GiB, 1 MiB
blocks, queue depth 32: bench/nvme_io.cpp). Reported: medians over the timed
steps of every repetition, and the ratios step rate / sequential rate per
direction.

Run: /usr/bin/python3 bench/offload_nvme.py --build-dir build [--dir /var/tmp/zinc-offload]
       [--threads 2] [--reps 3 --warmup 1 --steps 3] [--prefetch-distance N]
Writes bench/results/offload_nvme.json unless --out.
"""

import argparse
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


def compile_offloaded(build, onnx_path, work, prefetch_distance):
    import nanogpt
    c = nanogpt.CONFIGS[MODEL]
    plan = os.path.join(work, MODEL + "-nvme.zplan")
    argv = [os.path.join(build, "tools", "zinc-compile"), onnx_path, "-o", plan,
            "--dim", "batch=%d" % c.batch, "--dim", "seq=%d" % c.seq,
            "--optimizer=adamw", "--lr=%g" % tn.LR,
            "--offload-optimizer=nvme", "--offload-params=cpu"]
    if prefetch_distance is not None:
        argv.append("--prefetch-distance=%d" % prefetch_distance)
    tn.run(argv)
    return plan


def train_rep(build, plan, data, threads, warmup, steps, work, nvme_dir):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    metrics = os.path.join(work, "metrics.jsonl")
    tn.run([os.path.join(build, "tools", "zinc-run"), plan, "--backend=cpu",
            "--steps=%d" % (warmup + steps), "--data=" + data, "--metrics=" + metrics,
            "--nvme-dir=" + nvme_dir], env=env)
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    steps_out = []
    for m in lines[warmup:]:
        io = m.get("nvme_io")
        if io is None:
            sys.exit("offload_nvme.py: zinc-run's metrics have no nvme_io: is the plan offloaded?")
        steps_out.append({
            "seconds": m["seconds"], "loss": m["loss"],
            "read_bytes": io["read_bytes"], "write_bytes": io["write_bytes"],
            "read_requests": io["read_requests"], "write_requests": io["write_requests"],
            "read_busy_seconds": io["read_busy_seconds"],
            "write_busy_seconds": io["write_busy_seconds"],
            "read_gbps": io["read_bytes_per_second"] / 1e9,
            "write_gbps": io["write_bytes_per_second"] / 1e9})
    return steps_out


def engine_rep(build, nvme_dir):
    proc = tn.run([os.path.join(build, "bench", "zinc-bench-nvme"), "--dir=" + nvme_dir,
                   "--size=1GiB", "--block-size=1MiB", "--queue-depth=32",
                   "--warmup=1", "--loops=1"])
    out = json.loads(proc.stdout.decode())
    return {"read_gbps": out["read_gbps"], "write_gbps": out["write_gbps"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                         os.path.join(tn.ROOT, "build")))
    p.add_argument("--dir", default="/var/tmp/zinc-offload-nvme",
                   help="the NVMe tier's directory (a disk, not tmpfs); exports go here too")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--prefetch-distance", type=int,
                   help="zinc-compile --prefetch-distance (default: the compiler's)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "offload_nvme.json"))
    args = p.parse_args()
    if min(args.warmup, args.steps, args.reps) < 1:
        p.error("--warmup, --steps and --reps must be at least 1")
    os.makedirs(args.dir, exist_ok=True)
    work = os.path.join(args.dir, "work")
    nvme_dir = os.path.join(args.dir, "tier")
    os.makedirs(work, exist_ok=True)
    os.makedirs(nvme_dir, exist_ok=True)
    try:
        onnx_path, data, params = tn.prepare(MODEL, work, args.warmup + args.steps)
        plan = compile_offloaded(args.build_dir, onnx_path, work, args.prefetch_distance)
        steps, engine = [], []
        for r in range(args.reps):
            engine.append(engine_rep(args.build_dir, nvme_dir))
            steps += train_rep(args.build_dir, plan, data, args.threads, args.warmup,
                               args.steps, work, nvme_dir)
            print("rep %d: engine read %.2f write %.2f GB/s | step read %.2f write %.2f GB/s "
                  "(last step)" % (r, engine[-1]["read_gbps"], engine[-1]["write_gbps"],
                                   steps[-1]["read_gbps"], steps[-1]["write_gbps"]),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = lambda xs: statistics.median(xs)  # noqa: E731
    summary = {
        "step_seconds": med([s["seconds"] for s in steps]),
        "state_bytes_per_direction": med([s["read_bytes"] for s in steps]),
        "step_read_gbps": med([s["read_gbps"] for s in steps]),
        "step_write_gbps": med([s["write_gbps"] for s in steps]),
        "engine_read_gbps": med([e["read_gbps"] for e in engine]),
        "engine_write_gbps": med([e["write_gbps"] for e in engine]),
    }
    summary["ratio_read"] = summary["step_read_gbps"] / summary["engine_read_gbps"]
    summary["ratio_write"] = summary["step_write_gbps"] / summary["engine_write_gbps"]
    result = {
        "benchmark": "offload_nvme",
        "config": {"model": MODEL, "params": params, "threads": args.threads,
                   "warmup": args.warmup, "steps": args.steps, "reps": args.reps,
                   "prefetch_distance": args.prefetch_distance, "dir": args.dir,
                   "flags": "--offload-optimizer=nvme --offload-params=cpu"},
        "machine": {"cpu": cpu_name(), "nproc": os.cpu_count()},
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "summary": summary, "steps": steps, "engine": engine,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("%s, optimizer state on NVMe (%.0f MiB each way per step), %d threads: %.2f s/step"
          % (MODEL, summary["state_bytes_per_direction"] / 2**20, args.threads,
             summary["step_seconds"]))
    print("%-6s %14s %14s %8s" % ("", "step GB/s", "engine GB/s", "ratio"))
    for d in ("read", "write"):
        print("%-6s %14.2f %14.2f %8.2f" % (d, summary["step_%s_gbps" % d],
                                             summary["engine_%s_gbps" % d], summary["ratio_" + d]))
    print("JSON: " + args.out)


if __name__ == "__main__":
    main()
