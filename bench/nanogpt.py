"""nanoGPT, as users write it, at the sizes bench/train_gpt.py measures.

The model follows Karpathy's nanoGPT (model.py): token and position
embeddings, pre-LN blocks of causal self-attention (one c_attn Linear for q, k
and v, split; q @ k^T * 1/sqrt(head size); masked_fill of a tril buffer;
softmax; dropout; @ v) and an MLP (Linear, nn.GELU, Linear), a final LayerNorm,
a linear head and F.cross_entropy with ignore_index=-1. The head is untied from
the token embedding (nanoGPT ties them): zinc trains each initializer as its
own parameter, and tied weights would be a second path into one gradient that
the two frameworks accumulate in different orders.

Exported as users export for training: training mode (Dropout nodes kept,
ratio 0 here), dynamic batch and sequence axes that zinc-compile binds with
--dim batch=B --dim seq=T.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17


@dataclass(frozen=True)
class Config:
    name: str
    vocab: int
    n_layer: int
    n_head: int
    n_embd: int
    block: int  # the longest sequence (position embedding rows)
    batch: int
    seq: int
    dropout: float = 0.0
    seed: int = 0


CONFIGS = {
    # The model of the issue that asked for this benchmark: 27.4M parameters.
    "gpt-25m": Config("gpt-25m", vocab=8192, n_layer=6, n_head=8, n_embd=512,
                      block=256, batch=8, seq=256),
    # GPT-2 small's width, 10 layers: 83.6M parameters.
    "gpt-85m": Config("gpt-85m", vocab=8192, n_layer=10, n_head=12, n_embd=768,
                      block=256, batch=8, seq=256),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)
        self.n_head, self.n_embd = c.n_head, c.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(c.block, c.block))
                             .view(1, 1, c.block, c.block), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c.vocab, c.n_embd)
        self.wpe = nn.Embedding(c.block, c.n_embd)
        self.drop = nn.Dropout(c.dropout)
        self.h = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd)
        self.lm_head = nn.Linear(c.n_embd, c.vocab, bias=False)
        self.apply(self._init_weights)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * c.n_layer))
                # Distinct LayerNorm values: the exporter deduplicates equal
                # initializers, which would tie the LayerNorms together.
                if ".ln_" in name or name.startswith("ln_f"):
                    p.add_(0.02 * torch.randn_like(p))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)


def num_params(model):
    return sum(p.numel() for p in model.parameters())


def make_model(c):
    torch.manual_seed(c.seed)
    return GPT(c)


def make_data(c, steps):
    """tokens, targets: [steps, batch, seq] int64, uniform over the vocabulary."""
    rng = np.random.default_rng(c.seed + 1)
    seqs = rng.integers(0, c.vocab, size=(steps, c.batch, c.seq + 1), dtype=np.int64)
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
