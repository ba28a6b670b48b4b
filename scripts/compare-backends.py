#!/usr/bin/env python3
"""Train one plan on the cpu and the cuda backend and show where they part.

    scripts/compare-backends.py MODEL.onnx[.xz] --data DATA.safetensors \
        [--steps N] [--build-dir build] [--work DIR] [--top K] -- COMPILE-FLAGS...

Compiles MODEL with COMPILE-FLAGS, runs N steps (default 1) on each backend
with the same data and seed, and prints each step's two losses and then the
saved weights' tensors ordered by how far they differ (largest |cuda - cpu|
over the tensor's largest |cpu| value). With `--optimizer=sgd --lr=1` and one
step, a weight's difference is its gradient's: the tensor at the top names
the backward kernel that disagrees.
"""

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--build-dir", default=os.environ.get("ZINC_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    ap.add_argument("--work")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--against", default="cuda",
                    help="the backend compared with cpu (cpu: checks this script)")
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.flags = flags

    import numpy as np
    import safetensors_io as st

    work = args.work or tempfile.mkdtemp(prefix="zinc-compare-")
    os.makedirs(work, exist_ok=True)
    model = args.model
    if model.endswith(".xz"):
        plain = os.path.join(work, os.path.basename(model)[:-3])
        with lzma.open(model) as f, open(plain, "wb") as g:
            shutil.copyfileobj(f, g)
        model = plain
    tools = os.path.join(args.build_dir, "tools")
    plan = os.path.join(work, "plan.zplan")
    subprocess.run([os.path.join(tools, "zinc-compile"), model, "-o", plan] + args.flags,
                   check=True, stdout=subprocess.DEVNULL)
    losses, weights = {}, {}
    for side, backend in (("cpu", "cpu"), ("cuda", args.against)):
        metrics = os.path.join(work, "metrics-%s.jsonl" % side)
        saved = os.path.join(work, "weights-%s.safetensors" % side)
        nvme = os.path.join(work, "nvme-" + side)
        os.makedirs(nvme, exist_ok=True)
        subprocess.run([os.path.join(tools, "zinc-run"), plan, "--backend=" + backend,
                        "--steps=%d" % args.steps, "--data=" + args.data,
                        "--metrics=" + metrics, "--save-weights=" + saved,
                        "--nvme-dir=" + nvme], check=True)
        with open(metrics) as f:
            losses[side] = [json.loads(line)["loss"] for line in f if line.strip()]
        weights[side] = {k: st.to_numpy(v).astype(np.float64)
                            for k, v in st.load_file(saved).items()}
    print("step  cpu loss      cuda loss     relative")
    for i, (a, b) in enumerate(zip(losses["cpu"], losses["cuda"])):
        print("%4d  %-12.7g  %-12.7g  %.2e" % (i, a, b, abs(b - a) / max(abs(a), 1e-30)))
    rows = []
    for name, want in weights["cpu"].items():
        got = weights["cuda"][name]
        scale = float(np.abs(want).max()) or 1.0
        diff = np.abs(got - want)
        rows.append((float(diff.max()) / scale, name, want.shape, int(diff.argmax())))
    rows.sort(reverse=True)
    print("largest differences of the saved weights (max |cuda - cpu| / max |cpu|):")
    for rel, name, shape, at in rows[:args.top]:
        print("  %.3e  %s %s (first worst at flat index %d)" % (rel, name, list(shape), at))


if __name__ == "__main__":
    main()
