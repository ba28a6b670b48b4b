"""Export the bundled example: a small GPT-style decoder trained by zinc.

The model (PyTorch, exported to ONNX opset 17 with fixed shapes):
  tokens [4, 32] int64 -> token embedding (vocab 64, d_model 64)
                        + learned position embedding [32, 64]
  -> 2 pre-LN transformer blocks, each
       x + Attn(LayerNorm(x))   causal multi-head self-attention, 4 heads of 16,
                                written out as q@k^T / sqrt(16), a causal mask
                                (Where), Softmax, @v, output projection
       x + MLP(LayerNorm(x))    Linear 64->256, GELU (erf form), Linear 256->64
  -> final LayerNorm -> untied LM head (Linear 64->64, no bias)
  -> mean cross-entropy against targets [4, 32] int64: the graph output `loss`.
The head is untied on purpose: with tied weights the exporter's constant folding
turns the embedding's transpose into a second initializer, silently untying them
in the ONNX graph anyway.

The data: 16 steps of batches [4, 32] from a small synthetic "language", each
sequence either an arithmetic progression modulo 64 (random start and stride 1..7)
or a random pattern of period 2..5 repeated; targets are the next tokens. After a
few tokens of a sequence its continuation is fully predictable, so the loss
falls well below log(64) when the model trains.

Writes, next to this script:
  gpt.onnx            the model with its weights inline (~0.5 MB)
  data.safetensors    tokens, targets: [16, 4, 32] int64 (step, batch, seq)
  reference.json      PyTorch's loss for each step of the data with the exported
                      weights (forward only; step0_loss is what the e2e test
                      checks), and the losses of 64 steps of PyTorch AdamW
                      training with zinc's defaults (lr 1e-3, betas (0.9, 0.999),
                      eps 1e-8, weight decay 0.01), step i feeding data slice
                      i mod 16 and its loss measured before update i.

Regenerate (deterministic: fixed seeds, single thread):
  /usr/bin/python3 examples/gpt/export_gpt.py
It checks that every op of the exported graph is in include/zinc/ops/Ops.def
and prints the op histogram; it exits 1 if an op is missing from that list.
"""

import collections
import contextlib
import copy
import json
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import safetensors_io  # noqa: E402

VOCAB = 64
D_MODEL = 64
N_HEAD = 4
N_LAYER = 2
D_FF = 4 * D_MODEL
SEQ = 32
BATCH = 4
STEPS = 16
TRAIN_STEPS = 64  # 4 passes over the data, step i feeding slice i mod STEPS
SEED = 0
OPSET = 17


class CausalSelfAttention(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.q = nn.Linear(D_MODEL, D_MODEL)
        self.k = nn.Linear(D_MODEL, D_MODEL)
        self.v = nn.Linear(D_MODEL, D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        # True where a query may attend a key (key position <= query position).
        self.register_buffer(
            "allowed", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)),
            persistent=False)

    @staticmethod
    def heads(t):
        # [B, T, C] -> [B, H, T, C/H]. The sizes come from the tensor, as
        # users write it: exported with dynamic axes they are Shape -> Gather
        # chains that zinc folds once --dim binds batch and seq.
        b, t_len, _ = t.shape
        return t.reshape(b, t_len, N_HEAD, D_MODEL // N_HEAD).transpose(1, 2)

    def forward(self, x):
        b, t_len, _ = x.shape
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D_MODEL // N_HEAD)
        scores = scores.masked_fill(~self.allowed[:t_len, :t_len], float("-inf"))
        probs = self.attn_drop(torch.softmax(scores, dim=-1))
        y = torch.matmul(probs, v).transpose(1, 2).reshape(b, t_len, D_MODEL)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.attn = CausalSelfAttention(dropout)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc = nn.Linear(D_MODEL, D_FF)
        self.out = nn.Linear(D_FF, D_MODEL)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    """dropout: the probability of every nn.Dropout (embeddings, attention
    probabilities, both residual branches), as nanoGPT places them; 0 by
    default, which an eval-mode export drops and a training-mode export keeps
    as Dropout nodes of ratio 0. Sequences up to SEQ tokens of any batch."""

    def __init__(self, dropout=0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, D_MODEL)
        self.pos_emb = nn.Parameter(torch.randn(SEQ, D_MODEL) * 0.02)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(dropout) for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
        # LayerNorm starts at weight 1, bias 0 in PyTorch; the exporter would
        # then deduplicate the equal initializers into one (plus Identity nodes),
        # tying all LayerNorms together. Distinct values keep them separate.
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.add_(0.02 * torch.randn_like(m.weight))
                    m.bias.add_(0.02 * torch.randn_like(m.bias))

    def forward(self, tokens, targets):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.tok_emb(tokens) + self.pos_emb[positions])
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


@contextlib.contextmanager
def sized(**sizes):
    """The classes above at other sizes (VOCAB=256, SEQ=128, ...) while the
    block runs: they read this module's constants when they are built."""
    saved = {k: globals()[k] for k in sizes}
    globals().update(sizes)
    try:
        yield
    finally:
        globals().update(saved)


def make_data(seed=SEED):
    """tokens, targets: [STEPS, BATCH, SEQ] int64."""
    rng = np.random.default_rng(seed)
    seqs = np.empty((STEPS * BATCH, SEQ + 1), np.int64)
    for row in seqs:
        if rng.random() < 0.5:
            start, stride = rng.integers(0, VOCAB), rng.integers(1, 8)
            row[:] = (start + stride * np.arange(SEQ + 1)) % VOCAB
        else:
            pattern = rng.integers(0, VOCAB, size=rng.integers(2, 6))
            row[:] = np.resize(pattern, SEQ + 1)
    seqs = seqs.reshape(STEPS, BATCH, SEQ + 1)
    return (np.ascontiguousarray(seqs[:, :, :-1]),
            np.ascontiguousarray(seqs[:, :, 1:]))


def zinc_ops():
    path = os.path.join(ROOT, "include", "zinc", "ops", "Ops.def")
    with open(path) as f:
        return set(re.findall(r"^\s*ZINC_OP\(\s*(\w+)\s*,", f.read(), re.M))


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = GPT().eval()
    tokens, targets = make_data()
    t0 = torch.from_numpy(tokens[0])
    y0 = torch.from_numpy(targets[0])

    onnx_path = os.path.join(HERE, "gpt.onnx")
    torch.onnx.export(model, (t0, y0), onnx_path,
                      input_names=["tokens", "targets"], output_names=["loss"],
                      opset_version=OPSET, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.EVAL)

    import onnx  # after export: torch.onnx does not need it loaded
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m, full_check=True)
    hist = collections.Counter(n.op_type for n in m.graph.node)
    known = zinc_ops()
    print("op histogram (%d nodes):" % len(m.graph.node))
    for op, n in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %-28s %4d%s" % (op, n, "" if op in known else "   NOT IN Ops.def"))
    params = sum(int(np.prod(i.dims)) for i in m.graph.initializer)
    print("initializers: %d tensors, %d elements; gpt.onnx: %d bytes"
          % (len(m.graph.initializer), params, os.path.getsize(onnx_path)))
    print("inputs:", [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim])
                      for i in m.graph.input],
          "outputs:", [o.name for o in m.graph.output])
    missing = sorted(set(hist) - known)
    if any(n.domain not in ("", "ai.onnx") for n in m.graph.node):
        missing.append("(non-default domain)")

    safetensors_io.save_file({"tokens": tokens, "targets": targets},
                             os.path.join(HERE, "data.safetensors"))

    with torch.no_grad():
        forward = [float(model(torch.from_numpy(tokens[i]), torch.from_numpy(targets[i])))
                   for i in range(STEPS)]
    trained = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(trained.parameters(), lr=1e-3, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.01)
    train_losses = []
    for i in range(TRAIN_STEPS):
        opt.zero_grad()
        loss = trained(torch.from_numpy(tokens[i % STEPS]),
                       torch.from_numpy(targets[i % STEPS]))
        loss.backward()
        opt.step()
        train_losses.append(float(loss))

    reference = {
        "model": "gpt.onnx",
        "data": "data.safetensors",
        "step0_loss": forward[0],
        "forward_losses": forward,
        "adamw_train_losses": train_losses,
        "adamw": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01},
        "shapes": {"batch": BATCH, "seq": SEQ, "vocab": VOCAB, "d_model": D_MODEL,
                   "heads": N_HEAD, "layers": N_LAYER, "steps": STEPS},
        "torch": torch.__version__,
        "opset": OPSET,
    }
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(reference, f, indent=2)
        f.write("\n")
    print("step-0 loss %.6f (log(vocab) = %.4f); AdamW losses %.4f -> %.4f"
          % (forward[0], math.log(VOCAB), train_losses[0], train_losses[-1]))
    if missing:
        print("error: ops not in include/zinc/ops/Ops.def: %s" % ", ".join(missing),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
