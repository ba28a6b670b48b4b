"""Models exported for training as users export them, for the cuda e2e tests.

torchvision's resnet18 (convolutions, BatchNorm in training mode, MaxPool,
global average pooling) and mobilenet_v2 (depthwise convolutions, ReLU6 as
Clip, Dropout 0.2) with 10 classes on 32x32 images, and models.NanoGPT
(Dropout 0.1, dynamic batch and sequence axes), exported in training mode
with dynamic axes (models.export_training), with their data.

A GPU machine may carry another PyTorch whose exporter writes other graphs,
so the exports can be made here and carried:

    python3 test/e2e/training_exports.py DIR    # DIR/NAME.onnx.xz, NAME.safetensors

and the tests read them from $ZINC_E2E_EXPORTS when it is set (else export
with the local PyTorch). The convnets are exported with a periodic pattern as
weights, so that their ONNX files compress to almost nothing, and `prepared`
then draws He-initialised weights into the file (numpy, seeded): the pattern
makes degenerate networks (ties in MaxPool, near-identical channels) whose
gradients change by tens of percent under a 1e-6 change of the input, which
no comparison of two backends survives.
"""

import lzma
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "test", "lib"))

OPSET = 17
NAMES = ("resnet18", "mobilenet_v2", "nanogpt")


def _model(name):
    import torch
    if name == "nanogpt":
        import models
        return models.NanoGPT(dropout=0.1)
    import torch.nn.functional as F
    import torchvision

    class Classifier(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, targets):
            return F.cross_entropy(self.net(x), targets)

    nets = {"resnet18": torchvision.models.resnet18,
            "mobilenet_v2": torchvision.models.mobilenet_v2}
    return Classifier(nets[name](num_classes=10))


def _pattern_parameters(model):
    """Every parameter := a periodic pattern (period 251) of small values,
    offset per tensor so that no two initializers are equal (the exporter
    would merge them); norm scales around 1."""
    import torch
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            idx = torch.arange(p.numel(), dtype=torch.float64)
            vals = (((idx * 37 + 11 * i) % 251) - 125) / 125.0
            scale = 0.1 if p.dim() > 1 else 0.02
            base = 1.0 if (p.dim() == 1 and name.endswith("weight")) else 0.0
            p.copy_((base + scale * vals).view_as(p).to(p.dtype))


def export(name, directory):
    """Exports `name` and its data into `directory` as NAME.onnx and
    NAME.safetensors; returns (onnx path, data path, zinc-compile --dim flags)."""
    import numpy as np
    import torch
    import models
    import safetensors_io
    torch.manual_seed(0)
    model = _model(name).train()
    if name == "nanogpt":
        data = models.NanoGPT.make_data(np.random.default_rng(0))
    else:
        _pattern_parameters(model)
        data = models.ResNet18.make_data(np.random.default_rng(0))
    onnx_path = os.path.join(directory, name + ".onnx")
    data_path = os.path.join(directory, name + ".safetensors")
    models.export_training(model, data, OPSET, onnx_path)
    safetensors_io.save_file(data, data_path)
    return onnx_path, data_path, models.dim_flags(data)


def randomize_weights(onnx_path, seed=0):
    """Rewrites the float initializers of `onnx_path` in place: He-normal
    draws for weights of rank 2 and up, ones for norm scales, zeros for
    biases (BatchNorm's running statistics are kept)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load(onnx_path)
    rng = np.random.default_rng(seed)
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype != np.float32 or "running" in t.name:
            continue
        if a.ndim > 1:
            fan_in = int(np.prod(a.shape[1:]))
            b = rng.standard_normal(a.shape) * np.sqrt(2.0 / fan_in)
        elif t.name.endswith("weight"):
            b = np.ones(a.shape)
        else:
            b = np.zeros(a.shape)
        t.CopyFrom(numpy_helper.from_array(b.astype(np.float32), t.name))
    onnx.save(model, onnx_path)


def prepared(name, directory):
    """(onnx path, data path, --dim flags) of `name` in `directory`: from
    $ZINC_E2E_EXPORTS when it holds the model, else exported here. Raises
    ImportError when neither is possible."""
    carried = os.environ.get("ZINC_E2E_EXPORTS")
    if carried and os.path.exists(os.path.join(carried, name + ".onnx.xz")):
        onnx_path = os.path.join(directory, name + ".onnx")
        with lzma.open(os.path.join(carried, name + ".onnx.xz")) as f, \
                open(onnx_path, "wb") as g:
            shutil.copyfileobj(f, g)
        data_path = os.path.join(directory, name + ".safetensors")
        shutil.copy(os.path.join(carried, name + ".safetensors"), data_path)
        import safetensors_io
        import models
        dims = models.dim_flags(safetensors_io.load_file(data_path))
    else:
        import torch  # noqa: F401  (ImportError: no exporter here)
        if name != "nanogpt":
            import torchvision  # noqa: F401
        onnx_path, data_path, dims = export(name, directory)
    if name != "nanogpt":
        randomize_weights(onnx_path)
    return onnx_path, data_path, dims


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: training_exports.py DIR")
    import warnings
    # The exporter warns about every BatchNorm's num_batches_tracked.
    warnings.filterwarnings("ignore")
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    for name in NAMES:
        onnx_path, _, _ = export(name, directory)
        with open(onnx_path, "rb") as f, lzma.open(onnx_path + ".xz", "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(onnx_path)
        print("exported %s (%d bytes compressed)" % (name, os.path.getsize(onnx_path + ".xz")))


if __name__ == "__main__":
    main()
