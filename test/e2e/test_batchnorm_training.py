"""End-to-end: torchvision's resnet18 exported in training mode trains like PyTorch.

resnet18 (10 classes, 32x32 inputs, batch 8) wrapped so forward(x, targets)
returns the cross-entropy, exported with torch.onnx.TrainingMode.TRAINING at
opsets 14 and 17 (BatchNormalization with training_mode=1, momentum = 1 -
PyTorch's momentum, three outputs), is trained for 4 steps of SGD with
momentum by

    zinc-compile MODEL -o PLAN --optimizer=sgd --lr=0.001 --momentum=0.9
    zinc-run PLAN --steps=4 --data=DATA --metrics=M --save-weights=W

and by torch.optim.SGD on the same data, the module in train() mode. Checks:
  - every step's loss within 1e-4 relative of PyTorch's;
  - the trained weights (keyed by ONNX initializer name, paired with the
    module's parameters) within 1e-4 of the model's largest weight magnitude,
    as test_train_vs_pytorch.py measures, and per tensor, zinc's update
    (final - initial) within 1e-2 of PyTorch's largest update element;
  - each BatchNorm running mean, saved by --save-weights under its
    initializer name, within 1e-4 of its largest magnitude, and each running
    variance within 1e-4 of PyTorch's, which updates it with the unbiased
    batch variance (zinc follows PyTorch there, not ONNX's reference update
    with the population variance);
  - the compile report counts the running statistics as model state: not
    trainable, still in "params";
  - the same export compiled with --mode=infer normalises with the running
    statistics: its loss is PyTorch's in eval() mode within 1e-4 (batch
    statistics would give another loss).
The opset 17 case also runs with the weights and running statistics in the
CPU tier (--offload-params=cpu --offload-optimizer=cpu) and must give the same
bits.

Every comparison accepts agreement with PyTorch's float32 run or with the same
training in float64, whichever zinc's rounding follows (see below).

Why this data and learning rate. A ReLU whose input lies within float32
rounding noise of zero (about 1e-6 here) takes either side in two float32
implementations, and the gradient at that one position (up to 1e-2 in this
model) then differs: PyTorch's own float32 and float64 runs differ by 2.4e-3
in the loss on seed 2's data at lr 1e-3 for this reason, and zinc meets such
a point on seeds 1 to 3 and at lr 1e-2. Seed 0 at lr 1e-3 meets none in these
four steps on AVX-512 machines (zinc agrees with PyTorch to 1e-6 in the
losses); on an AVX2-only Zen 3 PyTorch's own float32 run meets one in step 3
(conv1.weight 2.4e-4 from float64, where zinc is within 1.6e-7 of float64),
hence the float64 reference. A failure here
after an unrelated change to the rounding of a kernel (a GEMM, a reduction
order) may be such a point; compare with a float64 PyTorch run before
suspecting BatchNorm.

Run: ZINC_BUILD_DIR=/path/to/build /usr/bin/python3 -m unittest test.e2e.test_batchnorm_training
"""

import copy
import json
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import models  # noqa: E402
import safetensors_io as st  # noqa: E402
from harness import run_tool, tools  # noqa: E402

STEPS = 4
RTOL = 1e-4
UPDATE_RTOL = 1e-2
LR, MOMENTUM = 0.001, 0.9


class BatchNormTrainingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.compile_bin, cls.run_bin = tools()
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory(prefix="zinc-e2e-bn-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_close(self, what, got, wants, rtol=RTOL):
        """`got` within rtol of its largest magnitude of one of `wants`."""
        errors = []
        for want in wants:
            self.assertEqual(got.shape, want.shape, what)
            scale = max(float(np.max(np.abs(want))), 1e-30)
            errors.append((float(np.max(np.abs(got.astype(np.float64) - want))) / scale, scale))
        rel, scale = min(errors)
        self.assertLessEqual(rel, rtol, "%s: max error %.3g of the largest magnitude %.3g "
                             "(float32 and float64 references)" % (what, rel, scale))

    def check_inference(self, model, data, path):
        """--mode=infer on the training-mode export: eval() semantics."""
        run_tool([self.compile_bin, path("model.onnx"), "-o", path("infer.zplan"),
                  "--mode=infer"] + models.dim_flags(data))
        first = {k: v[:1] for k, v in data.items()}
        st.save_file(first, path("infer-data.safetensors"))
        run_tool([self.run_bin, path("infer.zplan"), "--backend=cpu", "--steps=1",
                  "--data=" + path("infer-data.safetensors"),
                  "--save-outputs=" + path("infer-out.safetensors")])
        got = float(st.load_file(path("infer-out.safetensors"))["loss"])
        with torch.no_grad():
            want = float(copy.deepcopy(model).eval()(*models.step_inputs(data, 0)))
            batch = float(copy.deepcopy(model).train()(*models.step_inputs(data, 0)))
        self.assertAlmostEqual(got, want, delta=RTOL * abs(want))
        self.assertGreater(abs(batch - want), 100 * RTOL * abs(want))

    def run_case(self, opset, offload):
        work = os.path.join(self.tmp.name, "opset%d" % opset)
        os.makedirs(work, exist_ok=True)
        path = lambda f: os.path.join(work, f)  # noqa: E731

        model, data = models.build("resnet18", seed=0)
        data = {k: v[:STEPS] for k, v in data.items()}
        models.export_training(model, data, opset, path("model.onnx"))
        import onnx
        from onnx import numpy_helper
        exported = onnx.load(path("model.onnx"))
        batchnorms = [n for n in exported.graph.node if n.op_type == "BatchNormalization"]
        self.assertEqual(len(batchnorms), 20)
        for n in batchnorms:
            attrs = {a.name: a for a in n.attribute}
            self.assertEqual(attrs["training_mode"].i, 1)
            self.assertEqual(len(n.output), 3)
        inits = {t.name: numpy_helper.to_array(t) for t in exported.graph.initializer}
        imap = models.initializer_map(model, inits, buffers=True)
        st.save_file(data, path("data.safetensors"))
        if not offload:
            self.check_inference(model, data, path)

        reference = copy.deepcopy(model).train()
        want_losses = models.train_reference(reference, data, "sgd", steps=STEPS,
                                             lr=LR, momentum=MOMENTUM)
        want = models.weights_by_initializer(reference, imap, buffers=True)
        # The same training in float64: where PyTorch's float32 run takes
        # the other side of a ReLU within rounding noise of zero, this one
        # says which float32 run is off.
        reference64 = copy.deepcopy(model).double().train()
        data64 = {k: v.astype(np.float64) if v.dtype == np.float32 else v
                  for k, v in data.items()}
        want64_losses = models.train_reference(reference64, data64, "sgd", steps=STEPS,
                                               lr=LR, momentum=MOMENTUM)
        want64 = models.weights_by_initializer(reference64, imap, buffers=True)

        flags = ["--optimizer=sgd", "--lr=%g" % LR, "--momentum=%g" % MOMENTUM]
        runs = [("gpu", [])]
        if offload:
            runs.append(("offload", ["--offload-params=cpu", "--offload-optimizer=cpu"]))
        results = {}
        for tag, extra in runs:
            run_tool([self.compile_bin, path("model.onnx"), "-o", path(tag + ".zplan"),
                      "--report=" + path(tag + ".json")] + flags + extra
                     + models.dim_flags(data))
            run_tool([self.run_bin, path(tag + ".zplan"), "--backend=cpu",
                      "--steps=%d" % STEPS, "--data=" + path("data.safetensors"),
                      "--metrics=" + path(tag + ".jsonl"),
                      "--save-weights=" + path(tag + ".safetensors")])
            with open(path(tag + ".jsonl")) as f:
                losses = [json.loads(line)["loss"] for line in f]
            results[tag] = (losses, st.load_file(path(tag + ".safetensors")))

        losses, got = results["gpu"]
        for step, (z, w32, w64) in enumerate(zip(losses, want_losses, want64_losses)):
            self.assertLessEqual(min(abs(z - w32) / abs(w32), abs(z - w64) / abs(w64)), RTOL,
                                 "step %d: loss %r, PyTorch float32 %r, float64 %r"
                                 % (step, z, w32, w64))
        self.assertEqual(sorted(got), sorted(want))
        stats = [n for n in want if n.endswith(("running_mean", "running_var"))]
        self.assertEqual(len(stats), 40)
        weights = [n for n in want if n not in stats]
        largest = max(float(np.max(np.abs(want[n]))) for n in weights)
        for name in sorted(weights):
            # Against whichever reference zinc's float32 rounding follows.
            err, ref = min((float(np.max(np.abs(got[name].astype(np.float64) - w[name]))), tag)
                           for tag, w in (("float32", want), ("float64", want64)))
            self.assertLessEqual(err, RTOL * largest, "%s: max error %.3g (to PyTorch in %s), "
                                 "largest weight %.3g" % (name, err, ref, largest))
            update = float(np.max(np.abs(want[name] - inits[name])))
            self.assertLessEqual(err, UPDATE_RTOL * update, "%s: max error %.3g, "
                                 "largest update %.3g" % (name, err, update))
        for name in sorted(stats):
            self.check_close(name, got[name], [want[name], want64[name]])
            # The running statistics moved: the update is not a no-op.
            self.assertFalse(np.array_equal(got[name], inits[name]), name)

        with open(path("gpu.json")) as f:
            report = json.load(f)["model"]
        state = sum(inits[n].size for n in stats)
        params = sum(v.size for v in inits.values() if v.dtype.kind == "f")
        self.assertEqual(report["model_state"], state)
        self.assertEqual(report["params"], params)
        self.assertEqual(report["trainable_params"], params - state)

        if offload:
            off_losses, off = results["offload"]
            self.assertEqual(off_losses, losses)
            for name in sorted(got):
                np.testing.assert_array_equal(off[name], got[name], name)

    def test_opset14(self):
        self.run_case(14, offload=False)

    def test_opset17_and_offloaded(self):
        self.run_case(17, offload=True)


if __name__ == "__main__":
    unittest.main()
