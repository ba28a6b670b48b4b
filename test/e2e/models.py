"""Models, data, ONNX export and PyTorch reference training for the e2e tests.

Four models, each `forward(*inputs, targets) -> scalar loss`, exported with
fixed shapes to ONNX with the graph output `loss`:
  mlp  Linear/ReLU/Linear + cross-entropy
  cnn  Conv2d 3x3 pad 1, ReLU, MaxPool2d, Conv2d, ReLU, AdaptiveAvgPool2d(1),
       Linear + cross-entropy (no BatchNorm)
  gpt  the bundled example's decoder (examples/gpt/export_gpt.py: LayerNorm,
       causal softmax attention, GELU MLP, cross-entropy)
  resnet18  torchvision's resnet18 (10 classes) on 32x32 images + cross-entropy,
       exported in training mode (`export_training`: BatchNormalization with
       batch statistics and running-stat outputs)

Weights in the ONNX graph and in PyTorch correspond through the export:
`initializer_map` pairs each initializer of the untrained model's export with
the parameter it holds (or its transpose, which the exporter folds for Linear
layers on rank-3 inputs) by value, and `weights_by_initializer` then gives
PyTorch's weights under the names zinc's --save-weights uses. With
buffers=True the pairing covers the float buffers too (BatchNorm's running
mean and variance), and an initializer that keeps the name of the parameter
or buffer it holds, with its value, pairs by name (a training-mode export
keeps every BatchNorm tensor, and all BatchNorm weights start equal). (The
initializers of a re-export of the trained model, `onnx_initializers`, are the
same arrays.)

Everything is deterministic: fixed seeds, one thread.
"""

import io
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "gpt"))
import export_gpt  # noqa: E402

STEPS = 8


class MLP(nn.Module):
    IN, HIDDEN, CLASSES, BATCH = 32, 64, 10, 16

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(self.IN, self.HIDDEN)
        self.fc2 = nn.Linear(self.HIDDEN, self.CLASSES)

    def forward(self, x, targets):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), targets)

    @classmethod
    def make_data(cls, rng):
        x = rng.standard_normal((STEPS, cls.BATCH, cls.IN)).astype(np.float32)
        # Labels a fixed random linear map of x decides, so there is something
        # to learn.
        w = rng.standard_normal((cls.IN, cls.CLASSES))
        y = np.argmax(x @ w, axis=-1).astype(np.int64)
        return {"x": x, "targets": y}


class CNN(nn.Module):
    CHANNELS, SIZE, C1, C2, CLASSES, BATCH = 3, 12, 8, 16, 10, 8

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(self.CHANNELS, self.C1, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(self.C1, self.C2, 3, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(self.C2, self.CLASSES)

    def forward(self, x, targets):
        h = self.pool(F.relu(self.conv1(x)))
        h = self.gap(F.relu(self.conv2(h))).flatten(1)
        return F.cross_entropy(self.fc(h), targets)

    @classmethod
    def make_data(cls, rng):
        x = rng.standard_normal(
            (STEPS, cls.BATCH, cls.CHANNELS, cls.SIZE, cls.SIZE)).astype(np.float32)
        y = rng.integers(0, cls.CLASSES, size=(STEPS, cls.BATCH)).astype(np.int64)
        return {"x": x, "targets": y}


class GPT(export_gpt.GPT):
    """The bundled example's decoder (its sizes: batch 4, seq 32, vocab 64)."""

    @classmethod
    def make_data(cls, rng):
        tokens, targets = export_gpt.make_data(seed=int(rng.integers(1 << 31)))
        return {"tokens": tokens[:STEPS], "targets": targets[:STEPS]}


class NanoGPT(nn.Module):
    """A decoder written the way nanoGPT writes one: fused qkv projection
    split in three, view(B, T, nh, hs) from the input's sizes, a causal-mask
    buffer sliced to T, positions from torch.arange(0, T), GELU MLP, dropout
    everywhere, and the LM head tied to the token embedding. Cross-entropy
    ignores index -1, as nanoGPT's does."""

    VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD, BATCH, SEQ = 64, 32, 2, 4, 64, 4, 32

    class Attention(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            c = NanoGPT.N_EMBD
            self.c_attn = nn.Linear(c, 3 * c)
            self.c_proj = nn.Linear(c, c)
            self.attn_dropout = nn.Dropout(dropout)
            self.resid_dropout = nn.Dropout(dropout)
            self.register_buffer("bias", torch.tril(torch.ones(NanoGPT.BLOCK, NanoGPT.BLOCK))
                                 .view(1, 1, NanoGPT.BLOCK, NanoGPT.BLOCK))

        def forward(self, x):
            B, T, C = x.size()
            nh = NanoGPT.N_HEAD
            q, k, v = self.c_attn(x).split(C, dim=2)
            k = k.view(B, T, nh, C // nh).transpose(1, 2)
            q = q.view(B, T, nh, C // nh).transpose(1, 2)
            v = v.view(B, T, nh, C // nh).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self, dropout):
            super().__init__()
            c = NanoGPT.N_EMBD
            self.ln_1 = nn.LayerNorm(c)
            self.attn = NanoGPT.Attention(dropout)
            self.ln_2 = nn.LayerNorm(c)
            self.c_fc = nn.Linear(c, 4 * c)
            self.c_proj = nn.Linear(4 * c, c)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.dropout(self.c_proj(F.gelu(self.c_fc(self.ln_2(x)))))

    def __init__(self, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(self.VOCAB, self.N_EMBD)
        self.wpe = nn.Embedding(self.BLOCK, self.N_EMBD)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([self.Block(dropout) for _ in range(self.N_LAYER)])
        self.ln_f = nn.LayerNorm(self.N_EMBD)
        self.lm_head = nn.Linear(self.N_EMBD, self.VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        with torch.no_grad():  # distinct LayerNorms (see export_gpt.GPT)
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.add_(0.02 * torch.randn_like(m.weight))
                    m.bias.add_(0.02 * torch.randn_like(m.bias))

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)

    @classmethod
    def make_data(cls, rng):
        tokens, targets = export_gpt.make_data(seed=int(rng.integers(1 << 31)))
        return {"idx": tokens[:STEPS], "targets": targets[:STEPS]}


class ResNet18(nn.Module):
    """torchvision.models.resnet18(num_classes=10), 32x32 images, batch 8."""
    CHANNELS, SIZE, CLASSES, BATCH = 3, 32, 10, 8

    def __init__(self):
        super().__init__()
        import torchvision
        self.net = torchvision.models.resnet18(num_classes=self.CLASSES)

    def forward(self, x, targets):
        return F.cross_entropy(self.net(x), targets)

    @classmethod
    def make_data(cls, rng):
        x = rng.standard_normal(
            (STEPS, cls.BATCH, cls.CHANNELS, cls.SIZE, cls.SIZE)).astype(np.float32)
        y = rng.integers(0, cls.CLASSES, size=(STEPS, cls.BATCH)).astype(np.int64)
        return {"x": x, "targets": y}


MODELS = {"mlp": MLP, "cnn": CNN, "gpt": GPT, "nanogpt": NanoGPT,
          "resnet18": ResNet18}


def build(name, seed=0):
    """(model in eval mode, data {input name: [STEPS, ...] array}), seeded."""
    torch.manual_seed(seed)
    cls = MODELS[name]
    model = cls().eval()
    data = cls.make_data(np.random.default_rng(seed))
    return model, data


def step_inputs(data, step):
    """The inputs of one step as tensors, in the graph's input order."""
    return tuple(torch.from_numpy(np.ascontiguousarray(v[step])) for v in data.values())


def export(model, data, opset, path_or_file):
    """Export with fixed shapes (the shapes of one step of data), constant
    folding, eval-mode training semantics; the graph output is `loss`."""
    torch.onnx.export(model, step_inputs(data, 0), path_or_file,
                      input_names=list(data), output_names=["loss"],
                      opset_version=opset, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.EVAL)


def export_training(model, data, opset, path_or_file):
    """Export as users do for training: training mode (Dropout and
    BatchNormalization kept in their training forms: BatchNormalization has
    training_mode=1 and its running-stat outputs), no constant folding, and
    the batch and sequence axes of every integer input of rank 2 dynamic
    ("batch", "seq"); other inputs dynamic in their batch axis. The export
    runs the model's forward once in training mode, which updates its
    BatchNorm buffers: the module afterwards holds what the export holds."""
    dynamic = {}
    for name, value in data.items():
        step = value[0]
        dynamic[name] = {0: "batch", 1: "seq"} if (
            step.ndim == 2 and step.dtype.kind == "i") else {0: "batch"}
    torch.onnx.export(model, step_inputs(data, 0), path_or_file,
                      input_names=list(data), output_names=["loss"],
                      opset_version=opset, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING,
                      dynamic_axes=dynamic)


def dim_flags(data):
    """zinc-compile --dim flags binding export_training's axes to the data."""
    step = next(iter(data.values()))[0]
    flags = ["--dim", "batch=%d" % step.shape[0]]
    seqs = [v[0] for v in data.values() if v[0].ndim == 2 and v[0].dtype.kind == "i"]
    if seqs:
        flags += ["--dim", "seq=%d" % seqs[0].shape[1]]
    return flags


def onnx_initializers(model, data, opset):
    """{ONNX initializer name: float array} of an export of `model`."""
    import onnx
    from onnx import numpy_helper
    buf = io.BytesIO()
    export(model, data, opset, buf)
    m = onnx.load_from_string(buf.getvalue())
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def make_optimizer(name, params, **kw):
    """torch.optim with PyTorch defaults, overridden by kw (zinc's flag names)."""
    if name == "adamw":
        return torch.optim.AdamW(params, **kw)
    if name == "adam":
        return torch.optim.Adam(params, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, **kw)
    raise ValueError(name)


def train_reference(model, data, optimizer="adamw", steps=STEPS, delayed=False,
                    lr_factors=None, clip_grad_norm=None, grad_norms=None, grad_accum=1,
                    **kw):
    """Trains `model` in place for `steps` steps (step i feeds slice i);
    returns the loss of each step, measured before its update. `delayed`:
    ZeRO-Offload's delayed parameter update, as zinc-compile --dpu does it:
    the update of step i applies step i-1's gradients (none at step 0).
    `lr_factors`: a learning-rate schedule as transformers builds one, a
    LambdaLR whose factor of update k is lr_factors[k], stepped after each
    optimizer step as Trainer does (a delayed run's step 0 makes none).
    `clip_grad_norm`: torch.nn.utils.clip_grad_norm_(params, MAX) between
    backward and the update; each step's norm is appended to `grad_norms`
    when given. `grad_accum`: N micro-batches per step, `(loss / N).backward()`
    each, step i reading slices iN .. iN+N-1; the loss returned is their mean."""
    opt = make_optimizer(optimizer, model.parameters(), **kw)
    schedule = None
    if lr_factors is not None:
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: lr_factors[k])
    params = list(model.parameters())
    previous = None
    losses = []
    for i in range(steps):
        opt.zero_grad()
        micro_losses = []
        for k in range(grad_accum):
            micro = model(*step_inputs(data, i * grad_accum + k))
            (micro / grad_accum if grad_accum > 1 else micro).backward()
            micro_losses.append(float(micro))
        loss = sum(micro_losses) / grad_accum
        if clip_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
            if grad_norms is not None:
                grad_norms.append(float(norm))
        if delayed:
            current = [None if p.grad is None else p.grad.clone() for p in params]
            if previous is not None:
                for p, g in zip(params, previous):
                    p.grad = g
                opt.step()
                if schedule is not None:
                    schedule.step()
            previous = current
        else:
            opt.step()
            if schedule is not None:
                schedule.step()
        losses.append(float(loss))
    return losses


def _tensors(model, buffers):
    """{name: array} of the parameters, and the float buffers if asked."""
    out = {n: p.detach().numpy() for n, p in model.named_parameters()}
    if buffers:
        out.update({n: b.detach().numpy() for n, b in model.named_buffers()
                    if b.is_floating_point()})
    return out


def initializer_map(model, inits, buffers=False):
    """{ONNX initializer name: (PyTorch parameter name, transposed)}.

    Found by value in an export of the untrained model: each float initializer
    must equal exactly one parameter or its transpose (the exporter folds the
    transpose of a Linear weight applied to a rank-3 input), and each
    parameter must back exactly one initializer. Anything else (equal
    initializers merged by the exporter, a constant folded into a weight) is
    an error: zinc and PyTorch would train different things."""
    params = _tensors(model, buffers)
    # Float buffers not asked for (nanoGPT's causal mask) are no parameters:
    # zinc must leave them as they are, which the harness checks apart.
    other_buffers = [b.detach().numpy() for n, b in model.named_buffers()
                     if n not in params]
    out = {}
    for name, value in inits.items():
        if value.dtype.kind != "f":
            continue
        if name in params and params[name].shape == value.shape and \
                np.array_equal(params[name], value):
            out[name] = (name, False)
            continue
        if not any(p.shape == value.shape and np.array_equal(p, value)
                   for p in params.values()) and any(
                b.shape == value.shape and np.array_equal(b, value) for b in other_buffers):
            continue
        hits = []
        for pn, p in params.items():
            if p.shape == value.shape and np.array_equal(p, value):
                hits.append((pn, False))
            elif p.ndim == 2 and p.T.shape == value.shape and np.array_equal(p.T, value):
                hits.append((pn, True))
        if len(hits) != 1:
            raise AssertionError("initializer %r matches parameters %r, want exactly one"
                                 % (name, hits))
        out[name] = hits[0]
    backed = sorted(pn for pn, _ in out.values())
    if backed != sorted(params):
        raise AssertionError("parameters and initializers do not pair up: %r vs %r"
                             % (backed, sorted(params)))
    return out


def weights_by_initializer(model, imap, buffers=False):
    """The model's current parameters (and float buffers, if asked) keyed by
    ONNX initializer name."""
    params = _tensors(model, buffers)
    # np.array, not np.ascontiguousarray, which makes a 0-d parameter
    # (CLIP's logit_scale) 1-d.
    return {name: np.array(params[pn].T if t else params[pn], order="C")
            for name, (pn, t) in imap.items()}
