"""PyTorch baselines for the device check: what a user would run on one GPU.

The model is bench/shape_gpt.py's GPT (pre-LN, learned positions, q/k/v/out
and MLP linears with biases, exact GELU, untied head, mean cross-entropy),
with attention as torch's scaled_dot_product_attention (causal; the flash
kernel on a GPU in bf16), so the parameters match zinc's case one for one.
Every mode writes one JSON object (--out) and prints it:

  fsdp2      FSDP2 fully_shard on every block and the root, world size 1,
             CPUOffloadPolicy(pin_memory=True), MixedPrecisionPolicy(bf16
             params, fp32 reduce), AdamW on the CPU: the model larger than the
             GPU as PyTorch trains it.
  resident   the whole model on the GPU: eager, autocast bf16, SDPA flash,
             AdamW(fused=True).
  unlimited  resident at --probe-layers (e.g. 2,4) of the same width; the
             step time is fitted as a + b * layers and extrapolated to
             --layers: the speed the model would have with unlimited GPU
             memory.
  attention  SDPA (flash) forward + backward at --seq, head dims --head-dims,
             bf16, causal: seconds and TFLOP/s (causal FLOPs: half the
             square), the ceiling zinc.Attention is measured against.

Steps are timed with torch.cuda.synchronize around each; the figure is the
median of the --steps after --warmup. --gpu-mem-fraction caps PyTorch's
allocator as zinc's --gpu-mem caps its plan. --device cpu runs any mode at a
tiny size on the CPU (no autocast, no fused AdamW, math attention where
torch lacks SDPA): a check that the code runs, never a figure.

Run: python3 bench/gpu_baselines.py fsdp2 --layers 28 --d-model 4096 --heads 32 \
         --seq 2048 --batch 4 --out fsdp2.json
     python3 bench/gpu_baselines.py dry-run      (tiny, CPU: every mode it can)
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["fsdp2", "resident", "unlimited", "attention", "dry-run"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--probe-layers", default="2,4",
                    help="unlimited: the layer counts run resident")
    ap.add_argument("--head-dims", default="64,128", help="attention: head dims")
    ap.add_argument("--attention-batch", type=int, default=4)
    ap.add_argument("--attention-width", type=int, default=2048,
                    help="attention: heads x head dim (heads = width / head dim)")
    ap.add_argument("--gpu-mem-fraction", type=float, default=None,
                    help="cap the caching allocator at this fraction of the GPU")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--out", help="JSON written (default: stdout only)")
    return ap.parse_args(argv)


def build_model(cfg):
    """The GPT of bench/shape_gpt.py in torch.nn, SDPA attention."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    sdpa = getattr(F, "scaled_dot_product_attention", None)

    def attention(q, k, v):
        if sdpa is not None:
            return sdpa(q, k, v, is_causal=True)
        # torch < 2.0 (Debian's here): the same function, materialised.
        t = q.shape[-2]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        return s.masked_fill(mask, float("-inf")).softmax(-1) @ v

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.proj = nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            h = self.ln1(x)
            split = lambda y: y.view(b, t, self.h, d // self.h).transpose(1, 2)  # noqa: E731
            a = attention(split(self.q(h)), split(self.k(h)), split(self.v(h)))
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            self.tok = nn.Embedding(cfg["vocab"], d)
            self.pos = nn.Parameter(torch.zeros(cfg["seq"], d))
            self.blocks = nn.ModuleList(Block(d, cfg["heads"]) for _ in range(cfg["layers"]))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, cfg["vocab"], bias=False)

        def forward(self, tokens, targets):
            x = self.tok(tokens) + self.pos[: tokens.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def init_like_zinc(model):
    """zinc-run --init=random's distribution: matrices normal(0, 0.02),
    biases 0, norm scales 1 (the values differ; the cost does not)."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif "ln" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()


def param_count(model):
    return sum(p.numel() for p in model.parameters())


def config(args, layers=None):
    return {"layers": layers or args.layers, "d_model": args.d_model, "heads": args.heads,
            "seq": args.seq, "batch": args.batch, "vocab": args.vocab}


def batch_of(cfg, device, seed=1234):
    import torch
    g = torch.Generator().manual_seed(seed)
    stream = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), generator=g)
    return stream[:, :-1].contiguous().to(device), stream[:, 1:].contiguous().to(device)


def sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def timed_steps(step, warmup, steps, device):
    times, losses = [], []
    for _ in range(warmup + steps):
        sync(device)
        t0 = time.perf_counter()
        loss = step()
        sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    return {"step_seconds": statistics.median(times[warmup:]), "step_seconds_all": times,
            "losses": losses,
            "losses_finite": all(math.isfinite(l) for l in losses),
            "loss_falling": len(losses) >= 2 and losses[-1] < losses[0]}


def device_info(args):
    import torch
    info = {"torch": torch.__version__, "device": args.device}
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_total_bytes"] = torch.cuda.get_device_properties(0).total_memory
        if args.gpu_mem_fraction:
            torch.cuda.set_per_process_memory_fraction(args.gpu_mem_fraction, 0)
            info["gpu_mem_fraction"] = args.gpu_mem_fraction
    return info


def resident_case(args, cfg):
    """Eager PyTorch, all on one device: autocast bf16, SDPA, fused AdamW."""
    import torch
    dev = args.device
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    t0 = time.perf_counter()
    model = build_model(cfg).to(dev)
    init_like_zinc(model)
    cuda = dev == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, **({"fused": True} if cuda else {}))
    tokens, targets = batch_of(cfg, dev)
    setup = time.perf_counter() - t0

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=cuda):
            loss = model(tokens, targets)
        loss.backward()
        opt.step()
        return loss.item()

    result = {"params": param_count(model), "setup_seconds": setup}
    try:  # The same parameters as zinc's model of bench/shape_gpt.py.
        sys.path.insert(0, HERE)
        import shape_gpt
        result["params_shape_gpt"] = shape_gpt.param_count(shape_gpt.Config(
            "x", cfg["layers"], cfg["d_model"], cfg["heads"], seq=cfg["seq"],
            batch=cfg["batch"], vocab=cfg["vocab"]))
    except ImportError:  # onnx missing: shape_gpt cannot be imported.
        pass
    result.update(timed_steps(step, args.warmup, args.steps, dev))
    result["tokens_per_second"] = cfg["batch"] * cfg["seq"] / result["step_seconds"]
    if cuda:
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    del model, opt
    if cuda:
        torch.cuda.empty_cache()
    return result


def fsdp2_imports():
    """fully_shard and its policies, where this torch has them (2.6+ in
    torch.distributed.fsdp, 2.4-2.5 under _composable); None otherwise."""
    # Any exception: an old torch's distributed package can fail to import
    # on a newer Python (Debian's torch 1.13 on Python 3.12 raises
    # ValueError from a dataclass), which also means no FSDP2.
    try:
        from torch.distributed.fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy,
                                            fully_shard)
        return fully_shard, CPUOffloadPolicy, MixedPrecisionPolicy
    except Exception:
        pass
    try:
        from torch.distributed._composable.fsdp import (CPUOffloadPolicy,
                                                        MixedPrecisionPolicy, fully_shard)
        return fully_shard, CPUOffloadPolicy, MixedPrecisionPolicy
    except Exception:
        return None


def fsdp2_case(args, cfg):
    import torch
    import torch.distributed as dist
    found = fsdp2_imports()
    if found is None:
        return {"skipped": "this torch (%s) has no FSDP2 fully_shard" % torch.__version__}
    fully_shard, CPUOffloadPolicy, MixedPrecisionPolicy = found
    cuda = args.device == "cuda"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    if cuda:
        torch.cuda.set_device(0)
    t0 = time.perf_counter()
    # Built on the meta device, made on the CPU where the offloaded shards
    # live, initialised there; fully_shard keeps them there, pinned.
    with torch.device("meta"):
        model = build_model(cfg)
    model.to_empty(device="cpu")
    init_like_zinc(model)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    offload = CPUOffloadPolicy(pin_memory=cuda)
    for blk in model.blocks:
        fully_shard(blk, mp_policy=mp, offload_policy=offload)
    fully_shard(model, mp_policy=mp, offload_policy=offload)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    tokens, targets = batch_of(cfg, args.device)
    setup = time.perf_counter() - t0

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        return loss.item()

    result = {"params": param_count(model), "setup_seconds": setup,
              "policy": "fully_shard per block + root, CPUOffloadPolicy(pin_memory=True), "
                        "MixedPrecisionPolicy(bf16 params, fp32 reduce), world size 1"}
    result.update(timed_steps(step, args.warmup, args.steps, args.device))
    result["tokens_per_second"] = cfg["batch"] * cfg["seq"] / result["step_seconds"]
    if cuda:
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    dist.destroy_process_group()
    return result


def unlimited_case(args):
    probes = sorted({int(x) for x in args.probe_layers.split(",")})
    if len(probes) < 2:
        raise SystemExit("--probe-layers needs two layer counts at least")
    runs = []
    for layers in probes:
        r = resident_case(args, config(args, layers))
        runs.append({"layers": layers, "step_seconds": r["step_seconds"],
                     "params": r["params"], "losses": r["losses"]})
    # Least squares of step = a + b * layers over the probes.
    xs = [r["layers"] for r in runs]
    ys = [r["step_seconds"] for r in runs]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    step = a + b * args.layers
    return {"probes": runs, "fixed_seconds": a, "seconds_per_layer": b,
            "layers": args.layers, "step_seconds": step,
            "tokens_per_second": args.batch * args.seq / step if step > 0 else None}


def attention_case(args):
    import torch
    import torch.nn.functional as F
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is None:
        return {"skipped": "this torch (%s) has no scaled_dot_product_attention"
                           % torch.__version__}
    cuda = args.device == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    rows = []
    for d in [int(x) for x in args.head_dims.split(",")]:
        heads = max(1, args.attention_width // d)
        shape = (args.attention_batch, heads, args.seq, d)
        q, k, v = (torch.randn(shape, device=args.device, dtype=dtype, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn(shape, device=args.device, dtype=dtype)
        backend = None
        if cuda:
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                backend = sdpa_kernel(SDPBackend.FLASH_ATTENTION)
            except ImportError:
                backend = None

        def fwd():
            return sdpa(q, k, v, is_causal=True)

        def fwd_bwd():
            o = fwd()
            o.backward(grad)
            return o

        def median_seconds(fn, reps):
            for _ in range(3):
                fn()
            sync(args.device)
            times = []
            for _ in range(reps):
                if cuda:
                    start = torch.cuda.Event(enable_timing=True)
                    stop = torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop) * 1e-3)
                else:
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
            return statistics.median(times)

        reps = 20 if cuda else 2
        if backend is not None:
            with backend:
                f, fb = median_seconds(fwd, reps), median_seconds(fwd_bwd, reps)
        else:
            f, fb = median_seconds(fwd, reps), median_seconds(fwd_bwd, reps)
        # Causal: half of the 4 B H T^2 d of the two products; the backward
        # does 2.5x the forward's (five products of that size).
        flops_fwd = 4.0 * args.attention_batch * heads * args.seq ** 2 * d / 2
        rows.append({"head_dim": d, "heads": heads, "batch": args.attention_batch,
                     "seq": args.seq, "dtype": str(dtype), "causal": True,
                     "backend": "flash" if backend is not None else "default",
                     "forward_seconds": f, "forward_backward_seconds": fb,
                     "forward_tflops": flops_fwd / f / 1e12,
                     "forward_backward_tflops": 3.5 * flops_fwd / fb / 1e12})
    return {"rows": rows}


def dry_run(args):
    """Every mode at a tiny size on the CPU: the code paths run here."""
    args.device = "cpu"
    args.layers, args.d_model, args.heads, args.seq, args.batch, args.vocab = 2, 32, 4, 16, 2, 97
    args.warmup, args.steps, args.probe_layers = 1, 2, "1,2"
    args.head_dims, args.attention_width, args.attention_batch = "8", 16, 1
    out = {"resident": resident_case(args, config(args)), "unlimited": unlimited_case(args),
           "attention": attention_case(args)}
    try:
        out["fsdp2"] = fsdp2_case(args, config(args))
    except Exception as e:  # A CPU-only FSDP2 may refuse what a GPU takes.
        out["fsdp2"] = {"error": "%s: %s" % (type(e).__name__, e)}
    return out


def main(argv=None):
    args = parse_args(argv)
    result = {"mode": args.mode, "config": config(args)}
    if args.mode == "dry-run":
        args.device = "cpu"
    try:
        result.update(device_info(args))
        if args.mode == "dry-run":
            result.update(dry_run(args))
        elif args.mode == "resident":
            result.update(resident_case(args, config(args)))
        elif args.mode == "fsdp2":
            result.update(fsdp2_case(args, config(args)))
        elif args.mode == "unlimited":
            result.update(unlimited_case(args))
        else:
            result.update(attention_case(args))
    except Exception as e:
        result["error"] = "%s: %s" % (type(e).__name__, e)
        result["traceback"] = traceback.format_exc()[-3000:]
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text if args.mode == "dry-run" else
          json.dumps({k: result.get(k) for k in ("mode", "step_seconds", "tokens_per_second",
                                                 "params", "skipped", "error")}))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
