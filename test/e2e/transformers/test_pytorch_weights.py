"""End-to-end: the weights zinc saves load back into the exporting PyTorch
module and give zinc's loss (issue 34, item 6).

Each model is exported as users export for training (training mode,
dynamic axes, no constant folding), trained by zinc for a few AdamW steps
with a checkpoint after step 3 and the weights saved after step 4; then

- each file (the checkpoint's model.safetensors, --save-weights) loads into
  a fresh copy of the module with load_state_dict(strict=False) with no
  unexpected key, and the only missing keys are those allowed (below);
- every parameter of the module is loaded from the file;
- PyTorch's loss with the loaded weights on the batch zinc trains on next
  equals the loss zinc reports for that step (computed with exactly those
  weights) within 1e-5 relative. That is PyTorch's training-mode loss, the
  mode zinc's step runs in (resnet18's BatchNorm normalises with the
  batch's statistics, as zinc's step does), for the models whose Dropout is
  0; with Dropout on (nanoGPT at 0.1) the masks differ and only eval losses
  compare;
- PyTorch's eval-mode loss with the loaded weights equals, within 1e-5, the
  loss of zinc's inference plan (Dropout off, BatchNorm on its running
  statistics) of the exported model with the file's tensors as its
  initializers;
- where the model has BatchNorm, the running statistics of the checkpoint
  after step 3 updated by PyTorch's forward of step 3 are those zinc saved
  after step 4.

Missing keys allowed, and only these: a tied alias (a state_dict key whose
tensor is one the file fills under another key: nanoGPT's lm_head.weight,
GPT-2's lm_head.weight, BERT's decoder weight and bias), and a buffer that
is not a parameter and is not in the file (BatchNorm's num_batches_tracked
and BERT's position_ids, which the exporter keeps out of the graph or as
integers zinc does not train). A parameter is never allowed missing.

The GPT example is also exported the way examples/gpt/export_gpt.py does,
in eval mode with constant folding, which names the transposed Linear
weights `onnx::MatMul_<n>`: zinc-compile traces each to its module, and the
saved file holds `blocks.0.attn.q.weight` in PyTorch's layout.

Runs in the test virtualenv (transformers, torchvision):
  ZINC_BUILD_DIR=build build/test-venv/bin/python -m unittest discover \
      -s test/e2e/transformers -p test_pytorch_weights.py
"""

import copy
import json
import os
import re
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import models  # noqa: E402
import safetensors_io as st  # noqa: E402
from harness import run_tool, tools  # noqa: E402
import test_transformers  # noqa: E402

LOSS_RTOL = 1e-5
# Steps done when the checkpoint is written, and in all.
CHECKPOINT_AT, STEPS = 3, 4


def nanogpt_bench():
    """bench/nanogpt.py's model at a small size, exported by its export()."""
    import nanogpt
    c = nanogpt.Config("tiny", vocab=64, n_layer=2, n_head=4, n_embd=64, block=32,
                       batch=4, seq=32)
    model = nanogpt.make_model(c).eval()
    tokens, targets = nanogpt.make_data(c, models.STEPS)
    return model, {"tokens": tokens, "targets": targets}


def bench_export(model, data, opset, path):
    import nanogpt
    nanogpt.export(nanogpt.Config("tiny", vocab=64, n_layer=2, n_head=4, n_embd=64,
                                  block=32, batch=4, seq=32), path)


def nanogpt_dropout():
    """models.py's nanoGPT with Dropout 0.1, as training_exports.py has it."""
    torch.manual_seed(0)
    model = models.NanoGPT(dropout=0.1).eval()
    return model, models.NanoGPT.make_data(np.random.default_rng(0))


# name: (builder, export); builders give (module, data) as models.build does.
CASES = {
    "gpt": (lambda: models.build("gpt"), models.export_training),
    "gpt_folded": (lambda: models.build("gpt"), models.export),
    "nanogpt": (nanogpt_bench, bench_export),
    "nanogpt_tied": (lambda: models.build("nanogpt"), models.export_training),
    "nanogpt_dropout": (nanogpt_dropout, models.export_training),
    "gpt2": (test_transformers.build_gpt2, models.export_training),
    "bert": (test_transformers.build_bert, models.export_training),
    "resnet18": (lambda: models.build("resnet18"), models.export_training),
}


def header_of(path):
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(size))


def torch_loss(model, data, step):
    """The training-mode loss of `model` (a copy, left unchanged) on slice
    `step`, and the copy after that forward (its BatchNorm statistics)."""
    m = copy.deepcopy(model).train()
    with torch.no_grad():
        loss = m(*models.step_inputs(data, step))
    return float(loss), m


def eval_loss(model, data, step):
    """The eval-mode loss of `model` (a copy) on slice `step`."""
    m = copy.deepcopy(model).eval()
    with torch.no_grad():
        return float(m(*models.step_inputs(data, step)))


def load(model, path):
    """A copy of `model` with `path` loaded (strict=False): (copy, missing,
    unexpected, the file's keys)."""
    m = copy.deepcopy(model)
    sd = {k: torch.from_numpy(np.array(v)) for k, v in st.load_file(path).items()}
    result = m.load_state_dict(sd, strict=False)
    return m, list(result.missing_keys), list(result.unexpected_keys), set(sd)


class PytorchWeightsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-pytorch-weights-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def zinc_eval_loss(self, path, weights, data, step, dims):
        """zinc's loss on batch `step` in inference form (Dropout off,
        BatchNorm on its running statistics) with `weights` (ONNX keys) put
        into the exported model's initializers."""
        import onnx
        from onnx import numpy_helper
        model = onnx.load(path("model.onnx"))
        saved = st.load_file(weights)
        for t in model.graph.initializer:
            if t.name in saved:
                t.CopyFrom(numpy_helper.from_array(np.asarray(saved[t.name]), t.name))
        onnx.save(model, path("eval.onnx"))
        st.save_file({k: v[step:step + 1] for k, v in data.items()}, path("eval.safetensors"))
        run_tool([self.compile_bin, path("eval.onnx"), "-o", path("eval.zplan"),
                  "--mode=infer"] + dims)
        run_tool([self.run_bin, path("eval.zplan"), "--backend=cpu", "--steps=1",
                  "--data=" + path("eval.safetensors"),
                  "--save-outputs=" + path("eval-out.safetensors")])
        return float(st.load_file(path("eval-out.safetensors"))["loss"])

    def check_keys(self, model, path, missing, unexpected, keys, by_hand=()):
        self.assertEqual(unexpected, [], "%s: keys PyTorch does not know" % path)
        sd = model.state_dict(keep_vars=True)
        params = {k for k, t in sd.items() if isinstance(t, torch.nn.Parameter)}
        # A key's tensor, by storage: tied aliases share one.
        filled = {(t.data_ptr(), tuple(t.shape)) for k, t in sd.items() if k in keys}
        for k in missing:
            t = sd[k]
            tied = (t.data_ptr(), tuple(t.shape)) in filled
            self.assertTrue(tied or k not in params or k in by_hand,
                            "%s: parameter %s is missing and is no tied alias" % (path, k))
        for k in by_hand:
            self.assertIn(k, missing)
            filled.add((sd[k].data_ptr(), tuple(sd[k].shape)))
        for n, p in model.named_parameters():
            self.assertIn((p.data_ptr(), tuple(p.shape)), filled,
                          "%s: nothing in the file fills parameter %s" % (path, n))

    def check(self, name, run_flags=(), by_hand=None, compile_flags=(), work=None):
        """`by_hand`: a parameter the file cannot hold because the exporter
        folded it into a constant zinc-compile cannot name (its warning
        names the initializer), filled from the checkpoint's state as a
        user would, so that the loss still compares."""
        build, export = CASES[name]
        work = os.path.join(self.tmp.name, work or name)
        os.makedirs(work)
        path = lambda f: os.path.join(work, f)  # noqa: E731
        model, data = build()
        # With Dropout on, a training step's loss depends on the masks, which
        # differ between the frameworks: only eval-mode losses compare.
        dropout = any(isinstance(x, torch.nn.Dropout) and x.p > 0 for x in model.modules())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export(copy.deepcopy(model), data, 17, path("model.onnx"))
        st.save_file(data, path("data.safetensors"))
        # A fixed-shape export (constant folding) has no axes to bind.
        dims = models.dim_flags(data) if export is not models.export else []
        compiled = run_tool([self.compile_bin, path("model.onnx"), "-o", path("model.zplan"),
                             "--lr=1e-2"] + dims + list(compile_flags))
        # Every parameter is named; a folded export's constants are not.
        unnamed = b"hold no PyTorch tensor zinc can name"
        if export is models.export:
            self.assertIn(b"1 float initializer made by PyTorch's exporter (constants it "
                          b"folded, such as 'onnx::Add_", compiled.stderr)
        else:
            self.assertNotIn(unnamed, compiled.stderr)
        run = [self.run_bin, path("model.zplan"), "--backend=cpu",
               "--data=" + path("data.safetensors"), "--checkpoint-dir=" + path("ckpt"),
               "--checkpoint-every=%d" % CHECKPOINT_AT] + list(run_flags)
        run_tool(run + ["--steps=%d" % STEPS, "--metrics=" + path("metrics.jsonl"),
                        "--save-weights=" + path("weights.safetensors")])
        # One more step from the last checkpoint: the loss of the weights saved.
        run_tool(run + ["--steps=%d" % (STEPS + 1), "--resume=" + path("ckpt"),
                        "--metrics=" + path("resumed.jsonl")])
        losses = {}
        for f in ("metrics.jsonl", "resumed.jsonl"):
            with open(path(f)) as lines:
                for line in lines:
                    m = json.loads(line)
                    losses.setdefault(m["step"], m["loss"])

        checkpoint = path("ckpt/step-%d/model.safetensors" % CHECKPOINT_AT)
        loaded = {}
        for file, step in ((checkpoint, CHECKPOINT_AT), (path("weights.safetensors"), STEPS)):
            m, missing, unexpected, keys = load(model, file)
            self.check_keys(m, file, missing, unexpected, keys, [by_hand] if by_hand else [])
            if by_hand:
                folded = re.search(r"such as '(onnx::[^']+)'", compiled.stderr.decode()).group(1)
                state = st.load_file(path("ckpt/step-%d/state.safetensors" % step))
                with torch.no_grad():
                    m.get_parameter(by_hand).copy_(torch.from_numpy(state[folded]))
            got, after = torch_loss(m, data, step)
            if not dropout:
                want = losses[step]
                self.assertLessEqual(abs(got - want), LOSS_RTOL * abs(want),
                                     "%s: PyTorch's loss %r with the saved weights, zinc's "
                                     "%r at step %d" % (file, got, want, step))
            if not run_flags:  # ONNX keys: the file's tensors go back into the model
                want = self.zinc_eval_loss(path, file, data, step, dims)
                got = eval_loss(m, data, step)
                self.assertLessEqual(abs(got - want), LOSS_RTOL * abs(want),
                                     "%s: PyTorch's eval-mode loss %r with the saved "
                                     "weights, zinc's inference plan's %r on batch %d"
                                     % (file, got, want, step))
            loaded[step] = (m, after)
        # Training moved the weights: the two files differ.
        first, last = (dict(loaded[s][0].named_parameters()) for s in (CHECKPOINT_AT, STEPS))
        self.assertTrue(any(not torch.equal(first[k], last[k]) for k in first))

        # BatchNorm statistics: step 3's forward from the checkpoint's makes step 4's.
        after = dict(loaded[CHECKPOINT_AT][1].named_buffers())
        saved = dict(loaded[STEPS][0].named_buffers())
        stats = [k for k in after if k.endswith(("running_mean", "running_var"))]
        for k in stats:
            np.testing.assert_allclose(saved[k].numpy(), after[k].numpy(), rtol=1e-4,
                                       atol=1e-6, err_msg="running statistic " + k)
        return stats

    def test_gpt(self):
        self.check("gpt")

    def test_gpt_constant_folded(self):
        """examples/gpt's way of exporting: the transposed Linear weights
        the exporter names onnx::MatMul_<n> are saved under their modules'
        keys in PyTorch's layout with --weight-names=pytorch, and the
        header says which initializer each was."""
        # Constant folding also turned pos_emb[:T] into a constant of its own.
        self.check("gpt_folded", ["--weight-names=pytorch"], by_hand="pos_emb")
        header = header_of(os.path.join(self.tmp.name, "gpt_folded", "weights.safetensors"))
        meta = header.get("__metadata__", {})
        gpt = models.export_gpt
        # PyTorch's [out, in]; the initializer is [in, out].
        self.assertEqual(header["head.weight"]["shape"], [gpt.VOCAB, gpt.D_MODEL])
        self.assertEqual(header["blocks.0.fc.weight"]["shape"], [4 * gpt.D_MODEL, gpt.D_MODEL])
        self.assertFalse([k for k in header if k.startswith("onnx::")])
        self.assertTrue(meta.get("zinc.onnx_name.blocks.0.attn.q.weight", "")
                        .startswith("onnx::MatMul_"), meta)
        self.assertEqual(meta.get("zinc.onnx_layout.blocks.0.attn.q.weight"), "transposed")

    def test_gpt_constant_folded_tiled(self):
        """The same with every matrix split in 2 tiles along its output axis:
        the tiles are put together, then transposed into PyTorch's layout."""
        self.check("gpt_folded", ["--weight-names=pytorch"], by_hand="pos_emb",
                   compile_flags=["--tile=2"], work="gpt_folded_tiled")

    def test_gpt_constant_folded_onnx_keys(self):
        """By default the keys stay the ONNX initializer names (the
        --save-weights contract), and the header names each renamed one's
        PyTorch parameter."""
        model, data = models.build("gpt")
        work = os.path.join(self.tmp.name, "gpt_folded_onnx")
        os.makedirs(work)
        path = lambda f: os.path.join(work, f)  # noqa: E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models.export(model, data, 17, path("model.onnx"))
        st.save_file(data, path("data.safetensors"))
        run_tool([self.compile_bin, path("model.onnx"), "-o", path("model.zplan")])
        run_tool([self.run_bin, path("model.zplan"), "--backend=cpu", "--steps=1",
                  "--data=" + path("data.safetensors"),
                  "--save-weights=" + path("weights.safetensors")])
        header = header_of(path("weights.safetensors"))
        meta = header.pop("__metadata__")
        renamed = sorted(k for k in header if k.startswith("onnx::MatMul_"))
        self.assertEqual(len(renamed), 13, sorted(header))
        self.assertEqual(
            sorted(meta[k] for k in meta if k.startswith("zinc.pytorch_name.")),
            sorted("blocks.%d.%s.weight" % (b, m) for b in range(2)
                   for m in ("attn.q", "attn.k", "attn.v", "attn.proj", "fc", "out"))
            + ["head.weight"])
        for k in renamed:
            self.assertEqual(meta["zinc.pytorch_layout." + k], "transposed")

    def test_nanogpt(self):
        self.check("nanogpt")

    def test_nanogpt_tied(self):
        self.check("nanogpt_tied")

    def test_nanogpt_dropout(self):
        """Dropout 0.1 in training: the eval-mode losses compare."""
        self.check("nanogpt_dropout")

    def test_gpt2(self):
        self.check("gpt2")

    def test_bert(self):
        self.check("bert")

    def test_resnet18(self):
        stats = self.check("resnet18")
        self.assertEqual(len(stats), 40, "resnet18's 20 BatchNorms' running statistics")


if __name__ == "__main__":
    unittest.main()
