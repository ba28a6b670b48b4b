"""Export the bundled GPT at byte level: the model `make run` trains on text.

The classes of export_gpt.py (pre-LN decoder, learned positions, untied head,
the loss inside the module) at vocabulary 256 (one token per byte), width 128,
4 heads, 2 blocks, MLP 512, sequences up to 128 bytes: about 0.47M parameters.
Exported the way users export for training: training mode, dynamic batch and
sequence axes, no constant folding, opset 17; `zinc-compile --dim batch=B
--dim seq=T` (T <= 128) binds the axes.

Writes examples/gpt/gpt-bytes.onnx (~1.9 MB). Regenerate (deterministic:
fixed seed, single thread):
  /usr/bin/python3 examples/gpt/export_byte_gpt.py
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_gpt  # noqa: E402

SIZES = dict(VOCAB=256, D_MODEL=128, N_HEAD=4, N_LAYER=2, D_FF=512, SEQ=128)
SEED = 0


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    with export_gpt.sized(**SIZES):
        model = export_gpt.GPT().train()
        tokens = torch.from_numpy(
            np.random.default_rng(SEED).integers(0, 256, size=(2, 16), dtype=np.int64))
        path = os.path.join(HERE, "gpt-bytes.onnx")
        axes = {0: "batch", 1: "seq"}
        torch.onnx.export(model, (tokens, tokens), path,
                          input_names=["tokens", "targets"], output_names=["loss"],
                          opset_version=export_gpt.OPSET, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          dynamic_axes={"tokens": axes, "targets": axes})
    params = sum(p.numel() for p in model.parameters())
    print("gpt-bytes.onnx: %d parameters, %d bytes" % (params, os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
