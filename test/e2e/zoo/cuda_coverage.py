"""Whether a plan's every instruction has a kernel on the cuda backend.

Read from outside, without a GPU: the ops of the plan (zinc-dump's text)
against runtime/cuda/kernels/CudaOps.def, the cuda backend's table, less
the ops the executor runs itself (transfers) or computes once at start-up
with the cpu kernel (shape-only ops, CudaOps.def's header says which). A
plan with an op outside it is refused at load on the cuda backend, naming
the op; this finds that on machines without a GPU, in CI.
"""

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CUDA_OPS = os.path.join(ROOT, "runtime", "cuda", "kernels", "CudaOps.def")
# Run by the executor, or computed once at start-up on the host.
NOT_KERNELS = {"zinc.Copy", "zinc.CopyInto", "Constant", "ConstantOfShape", "Shape",
               "Range"}


def cuda_ops():
    """{op name as zinc-dump prints it} the cuda backend has kernels for."""
    ops = set()
    with open(CUDA_OPS) as f:
        for line in f:
            m = re.match(r"ZINC_CUDA_OP\((\w+), (\w+),", line)
            if m:
                ops.add(("zinc." if m.group(1) == "Zinc" else "") + m.group(2))
    return ops


def plan_ops(dump_bin, plan):
    """{op name as zinc-dump prints it} of the instructions of `plan`."""
    text = subprocess.run([dump_bin, plan], stdout=subprocess.PIPE, check=True,
                          universal_newlines=True).stdout
    used = set(re.findall(r"^\s+\d+: ([\w.]+) \"", text, re.M))
    assert used, "no instructions found in zinc-dump's text of " + plan
    return used


def missing_cuda_kernels(dump_bin, plan):
    """The ops of `plan` the cuda backend would refuse, sorted."""
    return sorted(plan_ops(dump_bin, plan) - cuda_ops() - NOT_KERNELS)
