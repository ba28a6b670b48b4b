"""End-to-end: stock Hugging Face architectures (zoo_models.TEXT: Llama,
OPT, GPT-NeoX, BLOOM, GPT-J, T5, RoBERTa, DistilBERT, Whisper, ViT, CLIP) exported
for training as users export them train in zinc as in PyTorch: 8 AdamW
steps with the checks of test_train_vs_pytorch.py (losses within 1e-4
relative, final weights and per-tensor updates).

Whisper is compared by its first update instead (first_update.py): its
convolutional front end on unnormalised features makes the trajectory
ill-conditioned (PyTorch's float32 losses leave float64's by 3e-4 from the
second step on), while one step's gradients are well-conditioned.

Runs in the test virtualenv that has transformers (made by `make test`):
  ZINC_BUILD_DIR=build build/test-venv/bin/python -m unittest discover -s test/e2e/zoo -p 'test_zoo_text.py'
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import models  # noqa: E402
import first_update  # noqa: E402
from cuda_coverage import missing_cuda_kernels, plan_ops  # noqa: E402
import zoo_models  # noqa: E402
from harness import ADAMW, TrainingComparison  # noqa: E402


class TextZooTest(TrainingComparison, unittest.TestCase):
    pass


BY_FIRST_UPDATE = {"whisper"}

# What the fusions make of each family's spelled-out formulas: the ops its
# plan must hold (both directions), and the ops they replace that it must
# not (Llama's Sigmoid, Neg and Concat come only from SiLU and rotate_half).
FUSED = {
    "llama": ({"zinc.RmsNorm", "zinc.RmsNormGrad", "zinc.Rotary", "zinc.RotaryGrad",
               "zinc.SwiGlu", "zinc.SwiGluGrad", "zinc.Attention", "zinc.AttentionGrad"},
              {"Sigmoid", "Neg", "Concat", "Sqrt", "ReduceMean", "zinc.Silu"}),
    "gpt_neox": ({"zinc.Rotary", "zinc.RotaryGrad"}, {"Neg"}),
}


def _add(name):
    def test(self):
        build = zoo_models.TEXT[name]
        model, data = build()
        if name in BY_FIRST_UPDATE:
            work = os.path.join(self.root, name)
            os.makedirs(work, exist_ok=True)
            first_update.compare(self, self.compile_bin, self.run_bin, work, model, data)
        else:
            self.check(name, 17, ADAMW, build=build, export=models.export_training,
                       compile_flags=models.dim_flags(data))
            work = os.path.join(self.root, "%s-opset17-adamw" % name)
        # And the same plan would load on the cuda backend.
        dump = os.path.join(os.path.dirname(self.compile_bin), "zinc-dump")
        plan = os.path.join(work, "model.zplan")
        self.assertEqual(missing_cuda_kernels(dump, plan), [])
        if name in FUSED:
            made, replaced = FUSED[name]
            ops = plan_ops(dump, plan)
            self.assertEqual(made - ops, set(), "fused ops missing from the plan")
            self.assertEqual(replaced & ops, set(), "unfused ops left in the plan")
    test.__doc__ = "%s, exported for training, trains 8 AdamW steps as in PyTorch" % name
    setattr(TextZooTest, "test_" + name, test)


for _name in zoo_models.TEXT:
    _add(_name)


if __name__ == "__main__":
    unittest.main()
