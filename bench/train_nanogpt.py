"""Training throughput at realistic sizes: zinc (cpu backend) vs PyTorch on nanoGPT.

The models are bench/nanogpt.py's (gpt-25m: 27.4M parameters, gpt-85m: 83.6M),
batch 8 x seq 256 (2048 tokens a step), fp32, AdamW (lr 1e-3, PyTorch's
defaults otherwise), exported as users export them (training mode, dynamic
axes) and compiled with --dim batch=8 --dim seq=256. Both sides start from the
same weights and see the same batches (uniform random tokens, a fixed seed).

Threads are fixed before either side starts, per thread count T:
- zinc-run gets OMP_NUM_THREADS=T and OPENBLAS_NUM_THREADS=T;
- PyTorch runs in a fresh process per setting, the pools set in its
  environment before torch loads (OMP_NUM_THREADS=T, torch.set_num_threads(T))
  with OPENBLAS_NUM_THREADS=B for every B in 1..T, and keeps its best: on
  small models Debian's torch collapses when both pools run T threads.

Each repetition runs --warmup untimed steps then --steps timed ones: zinc as
one `zinc-run --steps=W+N` process summing the per-step `seconds` of
metrics.jsonl, PyTorch as a zero_grad/forward/backward/step loop timed with
perf_counter. Steps/s = N / time; results are medians over --reps
repetitions (every repetition is in the JSON), the ratio zinc/PyTorch > 1
when zinc is faster. zinc and PyTorch alternate repetitions so that drift in
machine load hits both alike.

Run: /usr/bin/python3 bench/train_nanogpt.py --build-dir build
       [--models gpt-25m,gpt-85m] [--threads 1,2] [--reps 5 --warmup 1 --steps 3]
     build/test-venv/bin/python bench/train_nanogpt.py --models llama-25m
       (bench/llama.py: transformers' LlamaForCausalLM, 27.4M parameters)
       [--offload]   (also the 25M model with the optimizer on NVMe and the
                      parameters on CPU, against its resident plan)
Writes bench/results/train_nanogpt.json unless --out.
"""

import argparse
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from machine_info import cpu_name, git_commit  # noqa: E402

LR = 1e-3


def run(argv, env=None):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if proc.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s" % (" ".join(argv), proc.returncode,
                                               proc.stderr.decode()[-4000:]))
    return proc


def model_module(model):
    """The module defining `model`: bench/llama.py for the Llama decoders
    (transformers, so run under build/test-venv/bin/python), bench/nanogpt.py
    otherwise; both give CONFIGS, make_model, make_data and export."""
    if model.startswith("llama"):
        import llama
        return llama
    import nanogpt
    return nanogpt


def prepare(model, work, steps):
    """Exports the model and writes its batches; returns (onnx, data, params)."""
    import safetensors_io as st
    nanogpt = model_module(model)
    c = nanogpt.CONFIGS[model]
    onnx_path = os.path.join(work, model + ".onnx")
    params = nanogpt.export(c, onnx_path)
    tokens, targets = nanogpt.make_data(c, steps)
    data = os.path.join(work, model + "-data.safetensors")
    st.save_file({"tokens": tokens, "targets": targets}, data)
    return onnx_path, data, params


def compile_plan(build, model, onnx_path, work, offload):
    c = model_module(model).CONFIGS[model]
    plan = os.path.join(work, "%s%s.zplan" % (model, "-offload" if offload else ""))
    argv = [os.path.join(build, "tools", "zinc-compile"), onnx_path, "-o", plan,
            "--dim", "batch=%d" % c.batch, "--dim", "seq=%d" % c.seq,
            "--optimizer=adamw", "--lr=%g" % LR]
    if offload:
        argv += ["--offload-optimizer=nvme", "--offload-params=cpu"]
    run(argv)
    return plan


def zinc_rep(build, plan, data, threads, warmup, steps, work, offload):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    metrics = os.path.join(work, "metrics.jsonl")
    argv = [os.path.join(build, "tools", "zinc-run"), plan, "--backend=cpu",
            "--steps=%d" % (warmup + steps), "--data=" + data, "--metrics=" + metrics]
    if offload:
        argv.append("--nvme-dir=" + work)
    run(argv, env=env)
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if len(lines) != warmup + steps:
        sys.exit("zinc-run wrote %d metrics lines, expected %d" % (len(lines), warmup + steps))
    return {"steps_per_second": steps / sum(m["seconds"] for m in lines[warmup:]),
            "losses": [m["loss"] for m in lines]}


def torch_rep(model, data, threads, blas_threads, warmup, steps):
    """One repetition in a fresh process whose pools are set before torch loads."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(blas_threads), MKL_NUM_THREADS=str(threads))
    proc = run([sys.executable, os.path.abspath(__file__), "--torch-worker", model, data,
                str(threads), str(warmup), str(steps)], env=env)
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def timed_steps(step, warmup, steps):
    """Runs step(i) for the warm-up steps, then times the next `steps`:
    steps per second."""
    for i in range(warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(warmup, warmup + steps):
        step(i)
    return steps / (time.perf_counter() - t0)


def torch_worker(model, data, threads, warmup, steps):
    import numpy as np
    import torch
    import safetensors_io as st
    nanogpt = model_module(model)
    torch.set_num_threads(threads)
    c = nanogpt.CONFIGS[model]
    batches = st.load_file(data)
    n = batches["tokens"].shape[0]
    net = nanogpt.make_model(c).train()
    opt = torch.optim.AdamW(net.parameters(), lr=LR)
    losses = []

    def step(i):
        opt.zero_grad()
        loss = net(torch.from_numpy(np.ascontiguousarray(batches["tokens"][i % n])),
                   torch.from_numpy(np.ascontiguousarray(batches["targets"][i % n])))
        loss.backward()
        opt.step()
        losses.append(float(loss))

    rate = timed_steps(step, warmup, steps)
    print(json.dumps({"steps_per_second": rate, "losses": losses, "torch": torch.__version__}))


def ort_artifacts(ort_python, onnx_path, work):
    """Builds ONNX Runtime Training's artifacts (training, eval and optimizer
    graphs, checkpoint) for the exported model, once, outside the timing."""
    out = onnx_path + ".ort"
    if not os.path.exists(os.path.join(out, "checkpoint")):
        run([ort_python, os.path.abspath(__file__), "--ort-artifacts", onnx_path, out])
    return out


def ort_rep(ort_python, artifacts, data, threads, warmup, steps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    proc = run([ort_python, os.path.abspath(__file__), "--ort-worker", artifacts, data,
                str(threads), str(warmup), str(steps)], env=env)
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def ort_make_artifacts(onnx_path, out):
    import onnx
    from onnxruntime.training import artifacts
    model = onnx.load(onnx_path)
    # ORT's gradients of these read optional outputs the export leaves off
    # (Dropout's mask, the loss's log_prob, LayerNorm's statistics): named
    # here so that ORT can build its gradient graph.
    outputs = {"Dropout": 2, "SoftmaxCrossEntropyLoss": 2, "LayerNormalization": 3}
    for node in model.graph.node:
        while len(node.output) < outputs.get(node.op_type, 0):
            node.output.append("%s_out%d" % (node.name or node.output[0], len(node.output)))
    # Every float initializer is a parameter: the export keeps buffers (the
    # causal mask) as Constant nodes.
    params = [t.name for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT]
    os.makedirs(out, exist_ok=True)
    # The export's output is the loss itself: no loss block is added.
    artifacts.generate_artifacts(model, requires_grad=params, loss=None,
                                 optimizer=artifacts.OptimType.AdamW,
                                 artifact_directory=out)


def ort_worker(artifacts_dir, data, threads, warmup, steps):
    import numpy as np
    import onnxruntime
    from onnxruntime.training.api import CheckpointState, Module, Optimizer
    import safetensors_io as st
    batches = st.load_file(data)
    n = batches["tokens"].shape[0]
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    state = CheckpointState.load_checkpoint(os.path.join(artifacts_dir, "checkpoint"))
    module = Module(os.path.join(artifacts_dir, "training_model.onnx"), state,
                    os.path.join(artifacts_dir, "eval_model.onnx"), device="cpu",
                    session_options=opts)
    opt = Optimizer(os.path.join(artifacts_dir, "optimizer_model.onnx"), module)
    opt.set_learning_rate(LR)
    module.train()
    losses = []

    def step(i):
        loss = module(np.ascontiguousarray(batches["tokens"][i % n]),
                      np.ascontiguousarray(batches["targets"][i % n]))
        opt.step()
        module.lazy_reset_grad()
        losses.append(float(loss))

    rate = timed_steps(step, warmup, steps)
    print(json.dumps({"steps_per_second": rate, "losses": losses,
                      "onnxruntime": onnxruntime.__version__}))


def median_of(reps):
    return statistics.median(r["steps_per_second"] for r in reps)


def bench_model(args, model, work):
    offload = False
    onnx_path, data, params = prepare(model, work, args.warmup + args.steps)
    plan = compile_plan(args.build_dir, model, onnx_path, work, offload)
    arts = ort_artifacts(args.ort_python, onnx_path, work) if args.ort_python else None
    rows = []
    for threads in args.threads:
        zinc, torch_by_blas, ort = [], {b: [] for b in range(1, threads + 1)}, []
        for _ in range(args.reps):
            zinc.append(zinc_rep(args.build_dir, plan, data, threads, args.warmup,
                                 args.steps, work, offload))
            for b in torch_by_blas:
                torch_by_blas[b].append(torch_rep(model, data, threads, b, args.warmup,
                                                  args.steps))
            if arts:
                ort.append(ort_rep(args.ort_python, arts, data, threads, args.warmup,
                                   args.steps))
        best_blas = max(torch_by_blas, key=lambda b: median_of(torch_by_blas[b]))
        torch_reps = torch_by_blas[best_blas]
        z, t = median_of(zinc), median_of(torch_reps)
        loss_diff = abs(zinc[0]["losses"][0] - torch_reps[0]["losses"][0]) / abs(
            torch_reps[0]["losses"][0])
        row = {
            "model": model, "params": params, "offload": offload, "threads": threads,
            "zinc": {"median_steps_per_second": z, "reps": zinc},
            "pytorch": {"median_steps_per_second": t, "openblas_threads": best_blas,
                        "reps": torch_reps, "torch": torch_reps[0]["torch"],
                        "other_settings": {
                            "openblas_threads=%d" % b: {
                                "median_steps_per_second": median_of(r), "reps": r}
                            for b, r in torch_by_blas.items() if b != best_blas}},
            "ratio_zinc_over_pytorch": z / t,
            "step0_loss_rel_diff": loss_diff,
        }
        if ort:
            o = median_of(ort)
            row["onnxruntime_training"] = {"median_steps_per_second": o, "reps": ort,
                                           "version": ort[0]["onnxruntime"]}
            row["ratio_zinc_over_onnxruntime"] = z / o
        rows.append(row)
        print("%-8s %-8s %d thr  zinc %6.3f steps/s (%5.2f s/step)  PyTorch %6.3f "
              "(%5.2f s/step, OpenBLAS %d)  zinc/PyTorch %.2fx  step-0 loss diff %.1e" % (
                  model, "offload" if offload else "resident", threads, z, 1 / z, t, 1 / t,
                  best_blas, z / t, loss_diff), flush=True)
        if ort:
            print("%-8s          %d thr  ONNX Runtime Training %6.3f steps/s (%5.2f s/step)  "
                  "zinc/ORT %.2fx" % (model, threads, median_of(ort), 1 / median_of(ort),
                                      z / median_of(ort)), flush=True)
    return rows


def bench_offload(args, work):
    """gpt-25m offloaded (optimizer on NVMe, parameters on CPU) against the
    resident plan, zinc against itself: repetitions alternate between them."""
    model = "gpt-25m"
    onnx_path, data, params = prepare(model, work, args.warmup + args.steps)
    resident = compile_plan(args.build_dir, model, onnx_path, work, False)
    offload = compile_plan(args.build_dir, model, onnx_path, work, True)
    rows = []
    for threads in args.threads:
        res, off = [], []
        for _ in range(args.reps):
            res.append(zinc_rep(args.build_dir, resident, data, threads, args.warmup,
                                args.steps, work, False))
            off.append(zinc_rep(args.build_dir, offload, data, threads, args.warmup,
                                args.steps, work, True))
        r, o = median_of(res), median_of(off)
        rows.append({
            "model": model, "params": params, "offload": True, "threads": threads,
            "zinc_resident": {"median_steps_per_second": r, "reps": res},
            "zinc_offload": {"median_steps_per_second": o, "reps": off,
                             "flags": "--offload-optimizer=nvme --offload-params=cpu"},
            "ratio_offload_over_resident": o / r,
            "losses_identical": res[0]["losses"] == off[0]["losses"],
        })
        print("%-8s offload  %d thr  offload %6.3f steps/s (%5.2f s/step)  resident %6.3f "
              "(%5.2f s/step)  offload/resident %.2fx  losses identical: %s" % (
                  model, threads, o, 1 / o, r, 1 / r, o / r,
                  res[0]["losses"] == off[0]["losses"]), flush=True)
    return rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        model, data, threads, warmup, steps = sys.argv[2:7]
        torch_worker(model, data, int(threads), int(warmup), int(steps))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--ort-artifacts":
        ort_make_artifacts(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--ort-worker":
        arts, data, threads, warmup, steps = sys.argv[2:7]
        ort_worker(arts, data, int(threads), int(warmup), int(steps))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                         os.path.join(ROOT, "build")))
    p.add_argument("--models", default="gpt-25m,gpt-85m")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per repetition")
    p.add_argument("--steps", type=int, default=3, help="timed steps per repetition")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--offload", action="store_true",
                   help="also gpt-25m offloaded (optimizer on NVMe, parameters on CPU)")
    p.add_argument("--work-dir", help="keep the exports, data and plans here")
    p.add_argument("--ort-python", default=os.environ.get("ZINC_ORT_PYTHON"),
                   help="python of a virtualenv with onnxruntime-training (bench/setup_ort.sh "
                        "makes one): ONNX Runtime Training as a second baseline")
    p.add_argument("--out", default=os.path.join(HERE, "results", "train_nanogpt.json"))
    args = p.parse_args()
    if args.warmup < 1 or args.steps < 1 or args.reps < 1:
        p.error("--warmup, --steps and --reps must be at least 1")
    args.threads = [int(t) for t in args.threads.split(",") if t]
    models = [m for m in args.models.split(",") if m]
    import nanogpt
    for m in models:
        if m.startswith("llama"):
            import llama
            if m not in llama.CONFIGS:
                p.error("unknown model '%s' (known: %s)" % (m, ", ".join(llama.CONFIGS)))
        elif m not in nanogpt.CONFIGS:
            p.error("unknown model '%s' (known: %s)" % (m, ", ".join(nanogpt.CONFIGS)))

    rows = []
    if args.work_dir:
        os.makedirs(args.work_dir, exist_ok=True)
    work_ctx = (contextlib.nullcontext(args.work_dir) if args.work_dir
                else tempfile.TemporaryDirectory(prefix="zinc-nanogpt-"))
    with work_ctx as work:
        for m in models:
            rows += bench_model(args, m, work)
        if args.offload:
            rows += bench_offload(args, work)
    result = {
        "benchmark": "train_nanogpt",
        "config": {"backend": "cpu", "precision": "fp32", "optimizer": "adamw", "lr": LR,
                   "warmup": args.warmup, "steps": args.steps, "reps": args.reps},
        "machine": {"cpu": cpu_name(), "nproc": os.cpu_count()},
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "results": rows,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print("wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
