"""End-to-end: stock Hugging Face architectures (zoo_models.TEXT: Llama,
OPT, GPT-NeoX, BLOOM, T5, RoBERTa, DistilBERT, Whisper, ViT, CLIP) exported
for training as users export them train in zinc as in PyTorch: 8 AdamW
steps with the checks of test_train_vs_pytorch.py (losses within 1e-4
relative, final weights and per-tensor updates).

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
import zoo_models  # noqa: E402
from harness import ADAMW, TrainingComparison  # noqa: E402


class TextZooTest(TrainingComparison, unittest.TestCase):
    pass


# What a user tells zinc that an export cannot: Whisper's encoder positions
# are a parameter PyTorch does not train (requires_grad False).
FREEZE = {"whisper": ["--freeze=encoder\\.embed_positions"]}


def _add(name):
    def test(self):
        build = zoo_models.TEXT[name]
        _, data = build()
        self.check(name, 17, ADAMW, build=build, export=models.export_training,
                   compile_flags=models.dim_flags(data) + FREEZE.get(name, []))
    test.__doc__ = "%s, exported for training, trains 8 AdamW steps as in PyTorch" % name
    setattr(TextZooTest, "test_" + name, test)


for _name in zoo_models.TEXT:
    _add(_name)


if __name__ == "__main__":
    unittest.main()
