"""A Llama-style decoder from transformers' LlamaForCausalLM, at the sizes
bench/train_nanogpt.py measures: the interface of bench/nanogpt.py (CONFIGS,
make_model, make_data, export), so the same driver benchmarks it.

llama-25m: vocab 8192, 6 layers of width 512, 8 heads, SwiGLU of 1376
(27.4M parameters), batch 8 x seq 256. RMSNorm, rotary embeddings and the
SwiGLU MLP are spelled out op by op in the export, as transformers writes
them. Needs transformers (run under build/test-venv/bin/python).
"""

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

OPSET = 17


@dataclass(frozen=True)
class Config:
    name: str
    vocab: int
    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int
    block: int
    batch: int
    seq: int
    seed: int = 0


CONFIGS = {
    "llama-25m": Config("llama-25m", vocab=8192, n_layer=6, n_head=8, n_embd=512,
                        n_inner=1376, block=256, batch=8, seq=256),
}


class Llama(nn.Module):
    """forward(tokens, targets) -> the causal LM loss of LlamaForCausalLM;
    targets are the next tokens (the model shifts labels itself, so it gets
    the input sequence with the last target appended, cut back to T)."""

    def __init__(self, c):
        super().__init__()
        import transformers
        self.model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=c.vocab, hidden_size=c.n_embd, intermediate_size=c.n_inner,
            num_hidden_layers=c.n_layer, num_attention_heads=c.n_head,
            max_position_embeddings=c.block))

    def forward(self, tokens, targets):
        return self.model(input_ids=tokens, labels=tokens).loss


def num_params(model):
    return sum(p.numel() for p in model.parameters())


def make_model(c):
    torch.manual_seed(c.seed)
    return Llama(c)


def make_data(c, steps):
    """tokens, targets: [steps, batch, seq] int64 over the vocabulary less
    Llama's padding id 0."""
    rng = np.random.default_rng(c.seed + 1)
    seqs = rng.integers(1, c.vocab, size=(steps, c.batch, c.seq + 1), dtype=np.int64)
    return (np.ascontiguousarray(seqs[:, :, :-1]), np.ascontiguousarray(seqs[:, :, 1:]))


def export(c, path):
    """Writes the model, training mode and dynamic axes, to `path`."""
    model = make_model(c).train()
    tokens, targets = make_data(c, 1)
    torch.onnx.export(model, (torch.from_numpy(tokens[0]), torch.from_numpy(targets[0])),
                      path, input_names=["tokens", "targets"], output_names=["loss"],
                      opset_version=OPSET, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"},
                                    "targets": {0: "batch", 1: "seq"}})
    return num_params(model)
