"""Training step time on one GPU: zinc's cuda backend vs PyTorch, same model.

The model is bench/nanogpt.py's nanoGPT (as users write it: training mode,
dynamic axes) at --config. Both sides train it with AdamW (lr 1e-3, PyTorch's
defaults) on the same batches, from the same weights: a fixed pattern of
values (`pattern_weights`) rather than random ones, so that the exported
model compresses to almost nothing and can travel to a GPU machine that has
no exporter of the same version. The pattern changes no step's cost: every
product and kernel does the same work on any non-zero values.

Two phases, because the exporter and the GPU may be on different machines:

  prepare DIR   (any machine with torch): exports DIR/model.onnx.xz and
                DIR/data.safetensors, writes DIR/config.json.
  run DIR       (a machine with a GPU and torch with CUDA): zinc-compile's
                plans (fp32; bf16 mixed precision; fp32 with the optimizer
                offloaded to the CPU), zinc-run --backend=cuda, and PyTorch on
                the same GPU (fp32; bf16 autocast); per-step seconds, median
                of the timed steps after --warmup; ratio PyTorch/zinc (> 1:
                zinc is faster). The first steps' losses of zinc and PyTorch
                are printed side by side (same weights, same data).

Writes JSON (default bench/results/cuda_train_gpt.json) and prints a table.
"""

import argparse
import json
import lzma
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))

import nanogpt  # noqa: E402

CONFIGS = {
    # GPT-2 small's shape at a 1024-token context and an 8192-token
    # vocabulary: 92M parameters; batch 16 fills an H100's compute.
    "gpt2s": nanogpt.Config("gpt2s", vocab=8192, n_layer=12, n_head=12, n_embd=768,
                            block=1024, batch=16, seq=1024),
    # A quick one for checking the script.
    "tiny": nanogpt.Config("tiny", vocab=512, n_layer=2, n_head=4, n_embd=128,
                           block=128, batch=4, seq=128),
}


def pattern_weights(model):
    """Every parameter := a periodic pattern (period 251 elements) of small
    non-zero values, scaled like nanoGPT's init, offset per tensor so that no
    two initializers are equal (the exporter would merge them)."""
    import torch
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            n = p.numel()
            idx = torch.arange(n, dtype=torch.float64)
            vals = (((idx * 37 + 11 * i) % 251) - 125) / 125.0  # [-1, 1]
            if ".ln_" in name or name.startswith("ln_f"):
                vals = (1.0 if name.endswith("weight") else 0.0) + 0.02 * vals
            else:
                vals = 0.02 * vals
            p.copy_(vals.view_as(p).to(p.dtype))


def prepare(args):
    import numpy as np
    import torch
    c = CONFIGS[args.config]
    os.makedirs(args.dir, exist_ok=True)
    model = nanogpt.make_model(c).train()
    pattern_weights(model)
    tokens, targets = nanogpt.make_data(c, args.data_steps)
    path = os.path.join(args.dir, "model.onnx")
    torch.onnx.export(model, (torch.from_numpy(tokens[0]), torch.from_numpy(targets[0])),
                      path, input_names=["tokens", "targets"], output_names=["loss"],
                      opset_version=nanogpt.OPSET, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"},
                                    "targets": {0: "batch", 1: "seq"}})
    with open(path, "rb") as f, lzma.open(path + ".xz", "wb", preset=6) as g:
        g.write(f.read())
    os.remove(path)
    import safetensors_io  # test/lib
    safetensors_io.save_file({"tokens": tokens, "targets": targets},
                             os.path.join(args.dir, "data.safetensors"))
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump({"config": args.config, "params": nanogpt.num_params(model),
                   "data_steps": args.data_steps}, f)
    print("prepared %s: %d parameters, %s" % (
        args.config, nanogpt.num_params(model),
        ", ".join("%s %d KiB" % (n, os.path.getsize(os.path.join(args.dir, n)) >> 10)
                  for n in sorted(os.listdir(args.dir)))))


def run_tool(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s" % (" ".join(argv), proc.returncode,
                                               proc.stderr[-4000:]))
    return proc


def zinc_case(args, c, name, compile_flags, run_flags=()):
    tools = os.path.join(args.build_dir, "tools")
    work = os.path.join(args.dir, name)
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "model.zplan")
    run_tool([os.path.join(tools, "zinc-compile"), os.path.join(args.dir, "model.onnx"),
              "--mode=train", "--optimizer=adamw", "--lr=1e-3",
              "--dim", "batch=%d" % c.batch, "--dim", "seq=%d" % c.seq,
              "--hw=" + args.hw, "-o", plan, "--report=" + os.path.join(work, "report.json")]
             + list(compile_flags))
    metrics = os.path.join(work, "metrics.jsonl")
    nvme = os.path.join(work, "nvme")
    os.makedirs(nvme, exist_ok=True)
    steps = args.warmup + args.steps
    t0 = time.time()
    run_tool([os.path.join(tools, "zinc-run"), plan, "--backend=cuda",
              "--steps=%d" % steps, "--data=" + os.path.join(args.dir, "data.safetensors"),
              "--metrics=" + metrics, "--nvme-dir=" + nvme] + list(run_flags))
    wall = time.time() - t0
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    with open(os.path.join(work, "report.json")) as f:
        report = json.load(f)
    timed = [r["seconds"] for r in rows[args.warmup:]]
    return {"name": name, "step_seconds": statistics.median(timed),
            "losses": [r.get("loss") for r in rows],
            "measured_gpu_peak": max(r.get("peak_bytes", {}).get("gpu", 0) for r in rows),
            "report_gpu_peak": report["per_rank"]["tiers"]["gpu"]["peak"],
            "wall_seconds": wall}


def torch_case(args, c, name, bf16):
    import torch
    import safetensors_io  # test/lib
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    model = nanogpt.make_model(c).train()
    pattern_weights(model)
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = safetensors_io.load_file(os.path.join(args.dir, "data.safetensors"))
    n = data["tokens"].shape[0]
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        x = torch.from_numpy(data["tokens"][step % n]).to(dev)
        y = torch.from_numpy(data["targets"][step % n]).to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return {"name": name, "step_seconds": statistics.median(times[args.warmup:]),
            "losses": losses}


def run(args):
    with open(os.path.join(args.dir, "config.json")) as f:
        meta = json.load(f)
    c = CONFIGS[meta["config"]]
    onnx_path = os.path.join(args.dir, "model.onnx")
    if not os.path.exists(onnx_path):
        with lzma.open(onnx_path + ".xz") as f, open(onnx_path, "wb") as g:
            g.write(f.read())
    results = {"config": meta["config"], "params": meta["params"], "batch": c.batch,
               "seq": c.seq, "warmup": args.warmup, "steps": args.steps, "cases": []}
    import torch
    results["device"] = torch.cuda.get_device_name(0)
    pairs = [
        (zinc_case(args, c, "zinc fp32", []), torch_case(args, c, "torch fp32", False)),
        (zinc_case(args, c, "zinc bf16", ["--precision=bf16"]),
         torch_case(args, c, "torch bf16 autocast", True)),
        (zinc_case(args, c, "zinc fp32, optimizer on cpu",
                   ["--offload-optimizer=cpu"]), None),
    ]
    print("%-32s %12s %10s  first losses" % ("case", "step ms", "vs torch"))
    for z, t in pairs:
        ref = t or pairs[0][1]
        z["torch_step_seconds"] = ref["step_seconds"]
        z["ratio_vs_torch"] = ref["step_seconds"] / z["step_seconds"]
        results["cases"].append(z)
        print("%-32s %12.2f %10.3f  %s" % (z["name"], z["step_seconds"] * 1e3,
                                          z["ratio_vs_torch"],
                                          ["%.4f" % l for l in z["losses"][:3]]))
        if t:
            results["cases"].append(t)
            print("%-32s %12.2f %10s  %s" % (t["name"], t["step_seconds"] * 1e3, "",
                                            ["%.4f" % l for l in t["losses"][:3]]))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="phase", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("dir")
    a.add_argument("--config", default="gpt2s", choices=sorted(CONFIGS))
    a.add_argument("--data-steps", type=int, default=4)
    b = sub.add_parser("run")
    b.add_argument("dir")
    b.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                        os.path.join(ROOT, "build")))
    b.add_argument("--hw", default="h100-sxm")
    b.add_argument("--warmup", type=int, default=3)
    b.add_argument("--steps", type=int, default=10)
    b.add_argument("--out", default=os.path.join(HERE, "results", "cuda_train_gpt.json"))
    args = p.parse_args()
    prepare(args) if args.phase == "prepare" else run(args)


if __name__ == "__main__":
    main()
