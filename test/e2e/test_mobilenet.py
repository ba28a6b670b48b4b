"""End-to-end: torchvision mobilenet_v2 (BatchNorm, ReLU6 as Clip, Dropout
0.2, all in training mode) exported for training at opsets 14 and 17 with a
dynamic batch compiles and trains: 12 SGD-momentum steps (lr 0.01) on one
repeated batch of 8 32x32 images drive the loss from ~2.4 to well under a
quarter of it. (Its Dropout draws zinc's own masks, so the losses are not
PyTorch's step by step; resnet18 is the exact comparison.)

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest discover -s test/e2e -p test_mobilenet.py
"""

import json
import os
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
import safetensors_io as st  # noqa: E402
from harness import run_tool, tools  # noqa: E402

STEPS = 12


class MobileNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import torchvision
        self.net = torchvision.models.mobilenet_v2(num_classes=10)

    def forward(self, x, targets):
        return F.cross_entropy(self.net(x), targets)


class MobileNetTest(unittest.TestCase):
    def train(self, opset):
        compile_bin, run_bin = tools()
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        batch = rng.standard_normal((1, 8, 3, 32, 32)).astype(np.float32)
        labels = rng.integers(0, 10, size=(1, 8)).astype(np.int64)
        data = {"x": np.repeat(batch, STEPS, axis=0), "targets": np.repeat(labels, STEPS, axis=0)}
        with tempfile.TemporaryDirectory(prefix="zinc-mobilenet-") as d:
            p = lambda f: os.path.join(d, f)  # noqa: E731
            models.export_training(MobileNet().train(), data, opset, p("m.onnx"))
            st.save_file(data, p("data.safetensors"))
            run_tool([compile_bin, p("m.onnx"), "-o", p("m.zplan"), "--optimizer=sgd",
                      "--lr=0.01", "--momentum=0.9"] + models.dim_flags(data))
            run_tool([run_bin, p("m.zplan"), "--steps=%d" % STEPS,
                      "--data=" + p("data.safetensors"), "--metrics=" + p("m.jsonl")])
            with open(p("m.jsonl")) as f:
                return [json.loads(line)["loss"] for line in f if line.strip()]

    def check(self, opset):
        losses = self.train(opset)
        self.assertEqual(len(losses), STEPS)
        self.assertTrue(all(np.isfinite(losses)), losses)
        self.assertGreater(losses[0], 2.0, losses)  # about log(10) at the start
        self.assertLess(losses[-1], losses[0] / 4, "loss did not fall: %s" % losses)

    def test_opset17(self):
        self.check(17)

    def test_opset14(self):
        self.check(14)


if __name__ == "__main__":
    unittest.main()
