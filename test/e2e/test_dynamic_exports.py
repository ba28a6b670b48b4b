"""End-to-end: models exported the way users export them for training.

`torch.onnx.export(..., training=TrainingMode.TRAINING, do_constant_folding=False,
dynamic_axes={"tokens": {0: "batch", 1: "seq"}, ...})` leaves Dropout nodes
(ratio 0 here), and computes every size from Shape -> Gather chains: view()
targets, torch.arange(0, T) as Range, the causal mask sliced to T. zinc binds
--dim batch=4 --dim seq=32, folds all of it to constants, and must then train
exactly as PyTorch does (the checks and tolerances of
test_train_vs_pytorch.py: every step's loss within 1e-4 relative, final
weights within 1e-4 of the largest weight, per-tensor updates).

Models: the bundled example's GPT class (examples/gpt/export_gpt.py) with
every state on the GPU, and with a GPU budget of a quarter of its model
states (auto placement offloads) at sizes where the parameters dominate the
memory as in the models offloading is for (vocab 512, d_model 128, batch 2,
seq 8: at the example's own batch 4 x seq 32 its activations alone outgrow a
quarter of its model states, which takes activation checkpointing), and a nanoGPT-style decoder (fused qkv
split, view(B, T, nh, hs), a float causal-mask buffer, tied LM head,
ignore_index=-1), each at opsets 14 and 17, 8 AdamW steps.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_dynamic_exports.py
"""

import contextlib
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
from harness import ADAMW, TrainingComparison  # noqa: E402

ALL_ON_GPU = ["--offload-optimizer=none", "--offload-params=none"]
PARAM_HEAVY = dict(VOCAB=512, D_MODEL=128, D_FF=512, SEQ=8, BATCH=2)


@contextlib.contextmanager
def gpt_sizes(**sizes):
    """The example's module-level sizes, set for the model's whole life
    (construction, export, PyTorch training), then restored."""
    saved = {k: getattr(models.export_gpt, k) for k in sizes}
    try:
        for k, v in sizes.items():
            setattr(models.export_gpt, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(models.export_gpt, k, v)


class DynamicExportTest(TrainingComparison, unittest.TestCase):
    def check_dynamic(self, name, opset, flags=()):
        _, data = models.build(name)
        self.check(name, opset, ADAMW, export=models.export_training,
                   compile_flags=models.dim_flags(data) + list(flags))

    def quarter_budget_flags(self, name, opset):
        """--gpu-mem at a quarter of the model states an all-GPU compile
        reports (fp32 AdamW: parameters, gradients, m and v)."""
        model, data = models.build(name)
        work = os.path.join(self.root, "%s-opset%d-budget" % (name, opset))
        os.makedirs(work, exist_ok=True)
        onnx_path = os.path.join(work, "model.onnx")
        report = os.path.join(work, "report.json")
        models.export_training(model, data, opset, onnx_path)
        subprocess.run([self.compile_bin, onnx_path, "-o", os.path.join(work, "p.zplan"),
                        "--report=" + report] + models.dim_flags(data) + ALL_ON_GPU,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(report) as f:
            total = json.load(f)["per_rank"]["model_states_bytes"]["total"]
        return ["--gpu-mem=%d" % (total // 4)]


def _add(name, opset, budget):
    def test(self):
        with gpt_sizes(**(PARAM_HEAVY if budget else {})):
            flags = self.quarter_budget_flags(name, opset) if budget else ALL_ON_GPU
            self.check_dynamic(name, opset, flags)
    where = "a GPU budget of a quarter of its model states" if budget else "all on the GPU"
    test.__doc__ = ("%s exported for training with dynamic batch and seq, opset %d, %s: "
                    "zinc matches PyTorch" % (name, opset, where))
    setattr(DynamicExportTest, "test_%s_opset%d_%s" % (
        name, opset, "quarter_budget" if budget else "all_gpu"), test)


for _opset in (17, 14):
    _add("gpt", _opset, budget=False)
    _add("gpt", _opset, budget=True)
    _add("nanogpt", _opset, budget=False)


if __name__ == "__main__":
    unittest.main()
