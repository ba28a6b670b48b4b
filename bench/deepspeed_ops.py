#!/usr/bin/env python3
"""DeepSpeed's own C++ ops as a baseline, one measurement per call, one JSON line on stdout.

Run with the python of the venv bench/setup_deepspeed.sh makes (DeepSpeed 0.19.8 on Debian's
torch 1.13). bench/nvme_io.py and bench/cpu_adam.py call it between their own repetitions so
the baseline and zinc share the machine's state.

  deepspeed_ops.py aio  --dir D --size B --block-size B --queue-depth N [--warmup 1 --loops 5]
      DeepSpeed's aio_handle (libaio, O_DIRECT; ZeRO-Infinity's NVMe path) writes then reads
      one file from a page-locked buffer of the same size (handle.new_cpu_locked_tensor), as
      DeepSpeed's own NVMe benchmark does. The warm-up loop's write allocates the file; the
      timed writes overwrite it. Reports median GB/s (1e9 bytes/s) of each direction.
  deepspeed_ops.py adam --params N [--warmup 2 --steps 7] [--job fp32|mixed --loss-scale S]
      DeepSpeedCPUAdam (ZeRO-Offload's cpu_adam op), AdamW mode, on one flat fp32 tensor with
      an fp32 gradient. Reports median Mparams/s.
      --job mixed times what ZeRO-Offload's CPU side does per step in fp16 training with
      DeepSpeed 0.19's ops: unscale the fp32 gradient partition in place (grad.mul_(1/S), as
      unscale_and_clip_grads does), DeepSpeedCPUAdam.step(), then the fp16 copy of the
      updated parameters (bit16_partition.copy_(fp32_partition); 0.19's cpu_adam has no
      fused copy). Left out, to DeepSpeed's advantage: the fp16 gradients landing in the
      fp32 buffer. The scaled gradient is restored before each step, untimed.

Threads: OMP_NUM_THREADS as given (the caller fixes it), torch.set_num_threads the same.
"""
import argparse
import json
import os
import statistics
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="op", required=True)
    aio = sub.add_parser("aio")
    aio.add_argument("--dir", default="/var/tmp")
    aio.add_argument("--size", type=int, default=1 << 30)
    aio.add_argument("--block-size", type=int, default=1 << 20)
    aio.add_argument("--queue-depth", type=int, default=32)
    aio.add_argument("--warmup", type=int, default=1)
    aio.add_argument("--loops", type=int, default=5)
    adam = sub.add_parser("adam")
    adam.add_argument("--params", type=int, default=1 << 26)
    adam.add_argument("--warmup", type=int, default=2)
    adam.add_argument("--steps", type=int, default=7)
    adam.add_argument("--lr", type=float, default=1e-3)
    adam.add_argument("--weight-decay", type=float, default=1e-2)
    adam.add_argument("--job", choices=["fp32", "mixed"], default="fp32")
    adam.add_argument("--loss-scale", type=float, default=1024.0)
    return ap.parse_args()


args = parse_args()
os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(sys.prefix, "torch_extensions"))
# DeepSpeed logs to stdout: keep stdout for the one JSON line.
sys.stdout.flush()
json_fd = os.dup(1)
os.dup2(2, 1)

import torch  # noqa: E402

torch_version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
wrapper = os.path.join(sys.prefix, "bin", "g++-std17")
if torch_version < (2, 1) and "CXX" not in os.environ and os.path.exists(wrapper):
    os.environ["CXX"] = wrapper  # setup_deepspeed.sh says why
if os.environ.get("OMP_NUM_THREADS"):
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

import deepspeed  # noqa: E402


def emit(result):
    result["env"] = {"deepspeed": deepspeed.__version__, "torch": torch.__version__,
                     "threads": torch.get_num_threads()}
    os.write(json_fd, (json.dumps(result) + "\n").encode())


def run_aio():
    from deepspeed.ops.aio import AsyncIOBuilder
    from deepspeed.ops.op_builder.cpu.builder import CPUOpBuilder

    class Builder(AsyncIOBuilder):
        # DeepSpeed's cxx_args() removes '-std=c++17' when torch < 2.1, but the CPU builder's
        # flags hold none, so it raises ValueError; the same flags otherwise (C++17 from CXX).
        def cxx_args(self):
            try:
                return super().cxx_args()
            except ValueError:
                return CPUOpBuilder.cxx_args(self) + ["-Wall", "-O0", "-shared", "-fPIC", "-Wno-reorder"]

    if args.size % args.block_size:
        sys.exit("deepspeed_ops.py: --size must be a multiple of --block-size")
    aio = Builder().load()
    handle = aio.aio_handle(args.block_size, args.queue_depth, False, True, 1)
    wbuf = handle.new_cpu_locked_tensor(args.size, torch.empty(0, dtype=torch.uint8))
    rbuf = handle.new_cpu_locked_tensor(args.size, torch.empty(0, dtype=torch.uint8))
    wbuf.copy_(torch.randint(0, 256, (args.size,), dtype=torch.uint8,
                             generator=torch.Generator().manual_seed(0)))
    rbuf.zero_()
    path = os.path.join(args.dir, f"zinc-bench-ds-aio-{os.getpid()}.bin")

    def timed(start):
        t = time.perf_counter()
        if start() == -1:
            sys.exit("deepspeed_ops.py: aio op failed")
        if handle.wait() < 0:
            sys.exit("deepspeed_ops.py: aio wait failed")
        return time.perf_counter() - t

    writes, reads = [], []
    try:
        for i in range(args.warmup + args.loops):
            w = timed(lambda: handle.pwrite(wbuf, path, False, True))
            r = timed(lambda: handle.pread(rbuf, path, False, True))
            if i >= args.warmup:
                writes.append(w)
                reads.append(r)
        if not torch.equal(wbuf, rbuf):
            sys.exit("deepspeed_ops.py: the bytes read back differ from those written")
    finally:
        if os.path.exists(path):
            os.remove(path)
    handle.free_cpu_locked_tensor(wbuf)
    handle.free_cpu_locked_tensor(rbuf)
    emit({"op": "aio", "bytes": args.size, "block_bytes": args.block_size,
          "queue_depth": args.queue_depth, "warmup_loops": args.warmup,
          "write_loop_seconds": writes, "read_loop_seconds": reads,
          "write_gbps": args.size / statistics.median(writes) / 1e9,
          "read_gbps": args.size / statistics.median(reads) / 1e9})


def run_adam():
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    n = args.params
    gen = torch.Generator().manual_seed(0)
    param = torch.nn.Parameter(torch.randn(n, generator=gen, dtype=torch.float32))
    param.grad = torch.randn(n, generator=gen, dtype=torch.float32).mul_(1e-3)
    opt = DeepSpeedCPUAdam([param], lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                           weight_decay=args.weight_decay, adamw_mode=True)
    mixed = args.job == "mixed"
    if mixed:
        scaled = param.grad.mul(args.loss_scale)
        half = torch.empty(n, dtype=torch.float16)
        inv_scale = 1.0 / args.loss_scale

    def step():
        if not mixed:
            t = time.perf_counter()
            opt.step()
            return time.perf_counter() - t
        param.grad.copy_(scaled)
        t = time.perf_counter()
        param.grad.mul_(inv_scale)
        opt.step()
        half.copy_(param.detach())
        return time.perf_counter() - t

    for _ in range(args.warmup):
        step()
    times = [step() for _ in range(args.steps)]
    state = opt.state[param]
    assert state["exp_avg"].dtype == torch.float32 and state["exp_avg"].numel() == n
    emit({"op": "adam", "job": args.job, "loss_scale": args.loss_scale if mixed else None,
          "params": n, "warmup_steps": args.warmup, "step_seconds": times,
          "mparams_per_s": n / statistics.median(times) / 1e6})


run_aio() if args.op == "aio" else run_adam()
