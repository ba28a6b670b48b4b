"""End-to-end: Hugging Face GPT-2 and BERT, exported for training, train in
zinc as in PyTorch.

GPT2LMHeadModel and BertForMaskedLM from small configs (2 layers, hidden 64,
4 heads, vocab 64; nothing downloaded), dropout 0, wrapped so that
forward(idx, labels) returns the model's own loss (GPT-2 shifts the labels
itself; BERT's masked-LM labels are -100 where a token is not masked), are
exported as users export for training (training mode, no constant folding,
dynamic batch and seq axes) at opsets 14 and 17 and trained 8 AdamW steps,
with the checks of test_train_vs_pytorch.py (losses within 1e-4 relative,
weights within 1e-4 of the largest weight, per-tensor updates).

Every parameter gets a little noise after construction: Hugging Face starts
LayerNorms at 1/0 and biases at 0, and the comparison pairs ONNX initializers
with PyTorch parameters by value, which needs them distinct.

Runs in the test virtualenv that has transformers (scripts/setup-test-venv.sh,
made by `make test`):
  ZINC_BUILD_DIR=build build/test-venv/bin/python -m unittest discover -s test/e2e/transformers
"""

import os
import sys
import unittest

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import models  # noqa: E402
from harness import ADAMW, TrainingComparison  # noqa: E402

try:
    import transformers
except ImportError as e:  # the venv is made by `make test`; say how to get it
    raise ImportError("transformers is missing: run this under the test virtualenv "
                      "(scripts/setup-test-venv.sh build/test-venv)") from e

VOCAB, SEQ, BATCH, MASK_ID = 64, 32, 4, 63
SMALL = dict(hidden=64, layers=2, heads=4, inner=128)


class LossOf(nn.Module):
    """forward(idx, labels) -> the Hugging Face model's loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, labels):
        return self.model(input_ids=idx, labels=labels).loss


def distinct(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
    return model


def build_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=SMALL["hidden"], n_layer=SMALL["layers"],
        n_head=SMALL["heads"], n_inner=SMALL["inner"], resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0)
    model = distinct(LossOf(transformers.GPT2LMHeadModel(config)), 1).eval()
    tokens, _ = models.export_gpt.make_data(seed=3)
    tokens = tokens[:models.STEPS] % VOCAB
    return model, {"idx": tokens, "labels": tokens.copy()}


def build_bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=SMALL["hidden"], num_hidden_layers=SMALL["layers"],
        num_attention_heads=SMALL["heads"], intermediate_size=SMALL["inner"],
        max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    model = distinct(LossOf(transformers.BertForMaskedLM(config)), 2).eval()
    tokens, _ = models.export_gpt.make_data(seed=4)
    # Token 0 is BERT's pad_token_id: nn.Embedding(padding_idx=0) gives its
    # row no gradient, which ONNX's Gather cannot say, so an export trains
    # that row where PyTorch would not. Real inputs use 0 for padding only;
    # these have none, and MASK_ID is no ordinary token either.
    tokens = 1 + tokens[:models.STEPS] % (VOCAB - 2)
    rng = np.random.default_rng(5)
    masked = rng.random(tokens.shape) < 0.15
    idx = np.where(masked, MASK_ID, tokens).astype(np.int64)
    labels = np.where(masked, tokens, -100).astype(np.int64)
    return model, {"idx": idx, "labels": labels}


BUILDERS = {"gpt2": build_gpt2, "bert": build_bert}


class TransformersTest(TrainingComparison, unittest.TestCase):
    pass


def _add(name, opset):
    def test(self):
        _, data = BUILDERS[name]()
        self.check(name, opset, ADAMW, build=BUILDERS[name], export=models.export_training,
                   compile_flags=models.dim_flags(data))
    test.__doc__ = ("transformers %s, exported for training with dynamic axes at opset %d, "
                    "trains 8 AdamW steps as in PyTorch" % (name, opset))
    setattr(TransformersTest, "test_%s_opset%d" % (name, opset), test)


for _name in ("gpt2", "bert"):
    for _opset in (17, 14):
        _add(_name, _opset)


if __name__ == "__main__":
    unittest.main()
