#!/usr/bin/env python3
"""CPU Adam parameters/s: zinc's vectorised AdamW vs DeepSpeedCPUAdam, torch.optim.Adam(foreach=True)
and the memory-bandwidth roofline (a STREAM-like triad measured by zinc-bench-adam).

    /usr/bin/python3 bench/cpu_adam.py --build-dir build [--n 67108864] [--reps 7]
        [--rounds 3] [--threads T] [--torch-optimizer adam|adamw] [--out FILE]
        [--ds-python VENV/bin/python]   (bench/setup_deepspeed.sh makes the venv)

With --ds-python, two jobs are compared with DeepSpeed 0.19's cpu_adam, each in the same
rounds: the fp32 job (fp32 gradient, no copy: the same 28 bytes a parameter on both sides)
and the fp16 mixed-precision job of ZeRO-Offload's CPU side (a gradient scaled by the loss
scale in, the updated fp32 state and the fp16 parameter copy out): zinc in one pass reading
an fp16 gradient (optim::cpuAdam with unscale and copy), DeepSpeed as its ZeRO optimizer
does it with its ops (bench/deepspeed_ops.py --job mixed).

Rounds alternate one zinc-bench-adam process (its own --reps repetitions of the
triad and the update, interleaved) and --reps timed PyTorch steps, so a drifting
machine load hits both; medians over all repetitions are reported. Threads:
--threads, else OMP_NUM_THREADS, else the CPUs this process may use; zinc gets
them as OMP_NUM_THREADS, PyTorch as torch.set_num_threads. See bench/README.md.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_info import cpu_name  # noqa: E402

ISSUE_TARGET_VS_TORCH = 5.0
ISSUE_TARGET_ROOFLINE = 0.7


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


LOSS_SCALE = 1024.0


def run_zinc(exe, n, reps, threads, isa, mixed=False):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "zinc.json")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        argv = [exe, "--n", str(n), "--reps", str(reps), "--isa", isa, "--json", out]
        if mixed:
            argv += ["--grad", "f16", "--copy", "f16", "--loss-scale", str(LOSS_SCALE)]
        subprocess.run(argv, env=env, check=True, stdout=sys.stderr)
        with open(out) as f:
            return json.load(f)


def run_deepspeed(python, n, reps, threads, job):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run([python, os.path.join(here, "deepspeed_ops.py"), "adam",
                           "--params", str(n), "--steps", str(reps), "--job", job,
                           "--loss-scale", str(LOSS_SCALE)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cpu_adam.py: deepspeed_ops.py adam failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


class TorchAdam:
    """torch.optim.Adam/AdamW(foreach=True) on one fp32 tensor of n parameters."""

    def __init__(self, n, threads, which):
        import torch
        self.torch = torch
        torch.set_num_threads(threads)
        gen = torch.Generator().manual_seed(0)
        self.param = torch.nn.Parameter(torch.rand(n, generator=gen) * 2 - 1)
        self.param.grad = (torch.rand(n, generator=gen) - 0.5) * 0.02
        cls = torch.optim.AdamW if which == "adamw" else torch.optim.Adam
        kwargs = {"weight_decay": 1e-2} if which == "adamw" else {}
        self.opt = cls([self.param], lr=1e-3, foreach=True, **kwargs)
        for _ in range(2):  # warm-up: state allocation, first touch
            self.opt.step()

    def time_steps(self, reps):
        seconds = []
        with self.torch.no_grad():
            for _ in range(reps):
                t0 = time.perf_counter()
                self.opt.step()
                seconds.append(time.perf_counter() - t0)
        return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--n", type=int, default=64 << 20, help="parameters (default 64M)")
    ap.add_argument("--reps", type=int, default=7, help="timed repetitions per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--isa", default="best", help="zinc's ISA: best, avx512, avx2, scalar")
    ap.add_argument("--torch-optimizer", choices=["adam", "adamw"], default="adam",
                    help="PyTorch's optimizer (zinc runs AdamW, weight decay 1e-2, either way)")
    ap.add_argument("--ds-python", default=os.environ.get("DS_PYTHON", ""),
                    help="python of the venv bench/setup_deepspeed.sh made; empty: no DeepSpeed")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "results", "cpu_adam.json"))
    args = ap.parse_args()

    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or \
        len(os.sched_getaffinity(0))
    exe = os.path.join(args.build_dir, "bench", "zinc-bench-adam")
    if not os.path.exists(exe):
        sys.exit(f"cpu_adam.py: {exe} not found; build the zinc-bench-adam target first")

    if args.ds_python and not os.access(args.ds_python, os.X_OK):
        sys.exit(f"cpu_adam.py: --ds-python {args.ds_python} is not executable "
                 "(bash bench/setup_deepspeed.sh makes it)")
    torch_adam = TorchAdam(args.n, threads, args.torch_optimizer)
    zinc_seconds, triad_seconds, torch_seconds, zinc_runs = [], [], [], []
    ds = {"fp32": [], "mixed": []}
    zinc_mixed_seconds = []
    isa = None
    for r in range(args.rounds):
        z = run_zinc(exe, args.n, args.reps, threads, args.isa)
        isa = z["best_isa"]
        zinc_runs.append(z)
        zinc_seconds += z["adamw"][isa]["seconds"]
        triad_seconds += z["triad"]["seconds"]
        if args.ds_python:
            ds["fp32"] += run_deepspeed(args.ds_python, args.n, args.reps, threads,
                                        "fp32")["step_seconds"]
            zm = run_zinc(exe, args.n, args.reps, threads, args.isa, mixed=True)
            zinc_mixed_seconds += zm["adamw"][isa]["seconds"]
            ds["mixed"] += run_deepspeed(args.ds_python, args.n, args.reps, threads,
                                         "mixed")["step_seconds"]
        torch_seconds += torch_adam.time_steps(args.reps)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    n = args.n
    bytes_per_param = zinc_runs[0]["bytes_per_param"]
    zinc_pps = n / statistics.median(zinc_seconds)
    torch_pps = n / statistics.median(torch_seconds)
    triad_bps = 12.0 * n / statistics.median(triad_seconds)
    roofline_pps = triad_bps / bytes_per_param
    result = {
        "n": n,
        "threads": threads,
        "zinc_isa": isa,
        "zinc_optimizer": "AdamW (lr 1e-3, weight_decay 1e-2), fp32 grad, no copy",
        "torch_optimizer": f"torch.optim.{'AdamW' if args.torch_optimizer == 'adamw' else 'Adam'}"
                           f"(foreach=True), torch {torch_adam.torch.__version__}",
        "zinc_params_per_s": zinc_pps,
        "torch_params_per_s": torch_pps,
        "ratio_vs_torch": zinc_pps / torch_pps,
        "triad_bytes_per_s": triad_bps,
        "triad_bytes_per_s_with_write_allocate": triad_bps * 16 / 12,
        "bytes_per_param": bytes_per_param,
        "roofline_params_per_s": roofline_pps,
        "roofline_ratio": zinc_pps / roofline_pps,
        "targets": {"ratio_vs_torch": ISSUE_TARGET_VS_TORCH,
                    "roofline_ratio": ISSUE_TARGET_ROOFLINE},
        "seconds": {"zinc": zinc_seconds, "torch": torch_seconds, "triad": triad_seconds,
                    "zinc_mixed": zinc_mixed_seconds, "deepspeed_fp32": ds["fp32"],
                    "deepspeed_mixed": ds["mixed"]},
        "zinc_runs": zinc_runs,
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if args.ds_python:
        zm_pps = n / statistics.median(zinc_mixed_seconds)
        ds32_pps = n / statistics.median(ds["fp32"])
        dsm_pps = n / statistics.median(ds["mixed"])
        result["deepspeed"] = {
            "fp32": {"what": "DeepSpeedCPUAdam.step(), AdamW, fp32 grad (28 B/param both sides)",
                     "zinc_params_per_s": zinc_pps, "deepspeed_params_per_s": ds32_pps,
                     "ratio": zinc_pps / ds32_pps},
            "mixed": {"what": "fp16 ZeRO-Offload CPU side, loss scale %g: zinc's one pass "
                              "(fp16 grad, unscale, fp16 copy) vs grad.mul_(1/S) + "
                              "DeepSpeedCPUAdam.step() + fp16 copy_" % LOSS_SCALE,
                      "zinc_params_per_s": zm_pps, "deepspeed_params_per_s": dsm_pps,
                      "ratio": zm_pps / dsm_pps},
        }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)

    reps = args.rounds * args.reps
    print(f"CPU Adam, {n} fp32 parameters, {threads} threads, {reps} repetitions (medians), "
          f"{cpu_name()}, load average {os.getloadavg()[0]:.1f}")
    print(f"| {'':32} | {'Mparams/s':>10} | {'GB/s':>7} |")
    print(f"| {'zinc AdamW (' + isa + ')':32} | {zinc_pps / 1e6:10.1f} | "
          f"{zinc_pps * bytes_per_param / 1e9:7.2f} |")
    print(f"| {result['torch_optimizer'].split(',')[0]:32} | {torch_pps / 1e6:10.1f} | "
          f"{torch_pps * bytes_per_param / 1e9:7.2f} |")
    print(f"| {'roofline (triad / %d B)' % bytes_per_param:32} | {roofline_pps / 1e6:10.1f} | "
          f"{triad_bps / 1e9:7.2f} |")
    if args.ds_python:
        for job, d in result["deepspeed"].items():
            print(f"| {'DeepSpeedCPUAdam, ' + job + ' job':32} | "
                  f"{d['deepspeed_params_per_s'] / 1e6:10.1f} | {'':>7} |  zinc {job} job "
                  f"{d['zinc_params_per_s'] / 1e6:.1f} Mparams/s: zinc / DeepSpeed "
                  f"{d['ratio']:.2f}x")
    print(f"zinc / PyTorch: {result['ratio_vs_torch']:.2f}x (target >= {ISSUE_TARGET_VS_TORCH}x); "
          f"zinc / roofline: {result['roofline_ratio']:.2f} (target >= {ISSUE_TARGET_ROOFLINE}); "
          f"JSON: {args.out}")


if __name__ == "__main__":
    main()
