"""One zinc training case on a GPU, from a shape-only GPT to a JSON of figures.

The device check's big-model and resident stages (scripts/cuda-device-check.sh):
  1. writes the GPT of bench/shape_gpt.py (its weights file is never written:
     zinc-run --init=random fills the parameters where they live), and one
     batch of token ids, fed every step (repeated data: the loss must fall);
  2. zinc-compile --mode=train --optimizer=adamw --precision=bf16 against
     --hw (the description zinc-run --calibrate --backend=cuda wrote there),
     with --gpu-mem and the --compile-flag given, writing the report;
  3. zinc-run --init=random --steps=warmup+steps --metrics, on --backend;
  4. writes --out: the model (parameters, model states over the GPU budget),
     the report's proven peaks and predicted step, the measured median step
     over the timed steps, predicted/measured, tokens/s, the losses (finite,
     falling), the measured GPU peak against the proven one, wall seconds,
     and the error line when a phase failed.

Run: python3 bench/zinc_gpu_case.py --name big-cpu --layers 28 --d-model 4096 \
         --heads 32 --seq 2048 --batch 4 --hw hw.json --gpu-mem 80GB \
         --compile-flag=--offload-optimizer=cpu --out big-cpu.json
On a machine without a GPU, --backend=cpu runs a tiny case end to end.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True, help="the case's name in the JSON")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--d-model", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                         os.path.join(ROOT, "build")))
    ap.add_argument("--hw", default="h100-sxm", help="--hw for zinc-compile")
    ap.add_argument("--gpu-mem", help="--gpu-mem for zinc-compile (e.g. 80GB)")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--compile-flag", action="append", default=[])
    ap.add_argument("--run-flag", action="append", default=[])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--work", help="where the model, plan and logs go (default: next to --out)")
    ap.add_argument("--out", required=True, help="the JSON written")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds for zinc-run (default: none; the stage's watchdog)")
    return ap.parse_args(argv)


def write_inputs(path, batch, seq, vocab, seed=1234):
    """One batch of token ids as --data: tokens [1, B, T], targets the next
    token of the same random stream."""
    import numpy as np
    import safetensors_io  # test/lib
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, vocab, size=(batch, seq + 1), dtype=np.int64)
    safetensors_io.save_file({"tokens": stream[None, :, :-1].copy(),
                              "targets": stream[None, :, 1:].copy()}, path)


def last_error(text):
    lines = [l for l in text.splitlines() if "error" in l.lower()]
    return (lines or text.splitlines() or [""])[-1][:500]


def run_phase(result, phase, argv, timeout=None):
    t0 = time.time()
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        result["error"] = "%s timed out after %.0f s" % (phase, timeout)
        result[phase + "_seconds"] = time.time() - t0
        return None, (e.stdout or "") if isinstance(e.stdout, str) else ""
    result[phase + "_seconds"] = time.time() - t0
    if proc.returncode != 0:
        result["error"] = "%s exit %d: %s" % (phase, proc.returncode, last_error(proc.stderr))
        return None, proc.stdout + proc.stderr
    return proc, proc.stdout + proc.stderr


def summarize_metrics(result, rows, warmup, tokens_per_step):
    losses = [r.get("loss") for r in rows]
    result["losses"] = losses
    finite = [l for l in losses if l is not None]
    result["losses_finite"] = bool(finite) and all(math.isfinite(l) for l in finite)
    result["loss_falling"] = len(finite) >= 2 and finite[-1] < finite[0]
    timed = [r["seconds"] for r in rows[warmup:] if "seconds" in r]
    if timed:
        step = statistics.median(timed)
        result["step_seconds"] = step
        result["step_seconds_all"] = [r.get("seconds") for r in rows]
        result["tokens_per_second"] = tokens_per_step / step
    peaks = [r.get("peak_bytes", {}).get("gpu", 0) for r in rows]
    result["measured_gpu_peak"] = max(peaks) if peaks else None


def main(argv=None):
    args = parse_args(argv)
    import shape_gpt
    out_dir = os.path.dirname(os.path.abspath(args.out))
    work = args.work or os.path.join(out_dir, args.name + ".work")
    os.makedirs(work, exist_ok=True)
    cfg = shape_gpt.Config(args.name, args.layers, args.d_model, args.heads, seq=args.seq,
                           batch=args.batch, vocab=args.vocab)
    result = {"name": args.name, "model": cfg.as_dict(), "backend": args.backend,
              "precision": args.precision, "hw": args.hw, "gpu_mem": args.gpu_mem,
              "compile_flags": args.compile_flag, "run_flags": args.run_flag,
              "warmup": args.warmup, "steps": args.steps}

    def finish():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps({k: result.get(k) for k in (
            "name", "step_seconds", "predicted_step_seconds", "predicted_over_measured",
            "tokens_per_second", "loss_falling", "gpu_peak_within_proven", "error")}))
        return 0 if "error" not in result else 1

    t0 = time.time()
    model = os.path.join(work, "model.onnx")
    shape_gpt.write_model(cfg, model)
    data = os.path.join(work, "data.safetensors")
    write_inputs(data, args.batch, args.seq, args.vocab)
    result["generate_seconds"] = time.time() - t0

    tools = os.path.join(args.build_dir, "tools")
    plan = os.path.join(work, "model.zplan")
    report_path = os.path.join(work, "report.json")
    compile_argv = [os.path.join(tools, "zinc-compile"), model, "--mode=train",
                    "--optimizer=adamw", "--precision=" + args.precision, "--hw=" + args.hw,
                    "-o", plan, "--report=" + report_path] + args.compile_flag
    if args.gpu_mem:
        compile_argv.append("--gpu-mem=" + args.gpu_mem)
    result["compile_argv"] = compile_argv[1:]
    proc, text = run_phase(result, "compile", compile_argv)
    with open(os.path.join(work, "compile.log"), "w") as f:
        f.write(text)
    if proc is None:
        return finish()
    with open(report_path) as f:
        report = json.load(f)
    per_rank = report["per_rank"]
    gpu = per_rank["tiers"]["gpu"]
    states = per_rank["model_states_bytes"]["total"]
    result["report"] = {"params": report["model"]["params"],
                        "model_states_bytes": per_rank["model_states_bytes"],
                        "tiers": per_rank["tiers"], "predicted": report.get("predicted")}
    result["model_states_over_gpu"] = states / gpu["capacity"] if gpu["capacity"] else None
    result["predicted_step_seconds"] = report.get("predicted", {}).get("step_seconds")

    metrics = os.path.join(work, "metrics.jsonl")
    nvme = os.path.join(work, "nvme")
    os.makedirs(nvme, exist_ok=True)
    if os.path.exists(metrics):
        os.remove(metrics)
    run_argv = [os.path.join(tools, "zinc-run"), plan, "--backend=" + args.backend,
                "--init=random", "--steps=%d" % (args.warmup + args.steps), "--data=" + data,
                "--metrics=" + metrics, "--nvme-dir=" + nvme] + args.run_flag
    result["run_argv"] = run_argv[1:]
    proc, text = run_phase(result, "run", run_argv, args.timeout)
    with open(os.path.join(work, "run.log"), "w") as f:
        f.write(text)
    # zinc-run's notes: its time to first step and the parts of it.
    result["run_notes"] = [l for l in text.splitlines() if "note:" in l][:20]
    rows = []
    if os.path.exists(metrics):
        rows = [json.loads(l) for l in open(metrics) if l.strip()]
    summarize_metrics(result, rows, args.warmup, args.batch * args.seq)
    if result.get("step_seconds") and result.get("predicted_step_seconds"):
        result["predicted_over_measured"] = (result["predicted_step_seconds"] /
                                             result["step_seconds"])
    if result.get("measured_gpu_peak") is not None:
        result["proven_gpu_peak"] = gpu["peak"]
        result["gpu_peak_within_proven"] = result["measured_gpu_peak"] <= gpu["peak"]
    if "step_seconds" not in result and "error" not in result:
        result["error"] = "no timed step in %s" % metrics
    return finish()


if __name__ == "__main__":
    sys.exit(main())
