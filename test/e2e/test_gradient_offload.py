"""Gradients leave the GPU once, as soon as they are complete.

With fp16 loss scaling and the optimizer offloaded to the CPU, every gradient
is read twice after backward: on the GPU by the overflow check
(zinc.CheckFiniteGrads) and on the host by the optimizer update. The check
only reads the gradients (its op declares that it writes just its found_inf
flag), so each gradient's one device-to-host copy is issued right after the
gradient is complete, overlapping the rest of backward, and the host update
reads that copy. A compiler that took the check for a writer of every
gradient would invalidate the early copies and send each gradient across a
second time after backward.
"""
import os
import re
import tempfile
import unittest

from harness import run_tool, tools

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(REPO, "examples", "gpt", "gpt.onnx")


def parse_text_plan(text):
    """Tensors (id -> name) and instructions (dicts, in plan order) of a plan
    written by `zinc-compile --emit=text` (protobuf text format)."""
    tensors, instructions = {}, []
    for kind, body in re.findall(r"^(tensors|instructions) \{\n(.*?)^\}", text, re.M | re.S):
        fields = re.findall(r"^  (\w+): (.*)$", body, re.M)
        if kind == "tensors":
            entry = dict(fields)
            tensors[int(entry.get("id", 0))] = entry["name"].strip('"')
        else:
            inst = {"inputs": [], "outputs": []}
            for key, value in fields:
                if key in ("inputs", "outputs"):
                    inst[key].append(int(value))
                else:
                    inst[key] = value.strip('"')
            instructions.append(inst)
    return tensors, instructions


class GradientOffloadTest(unittest.TestCase):
    def compile_plan(self, *flags):
        compile_tool, _ = tools()
        with tempfile.TemporaryDirectory() as tmp:
            plan = os.path.join(tmp, "plan.txt")
            run_tool([compile_tool, GPT, "-o", plan, "--emit=text"] + list(flags))
            with open(plan) as f:
                return parse_text_plan(f.read())

    def check_each_gradient_crosses_once(self, *flags):
        tensors, insts = self.compile_plan(*flags)
        optimizers = [i for i in insts if i.get("domain") == "zinc" and i["op"] == "AdamW"]
        self.assertTrue(optimizers, "no optimizer updates in the plan")
        self.assertTrue(all(i.get("stream") == "STREAM_HOST" for i in optimizers),
                        "the update should run on the host")
        producer = {}  # tensor -> index of the instruction writing it
        for k, inst in enumerate(insts):
            for out in inst["outputs"]:
                producer[out] = k
        d2h = [(k, i) for k, i in enumerate(insts)
               if i["op"] == "Copy" and i.get("stream") == "STREAM_D2H"]
        grads = []
        for opt in optimizers:
            host_grad = opt["inputs"][1]
            copy_at = producer[host_grad]
            copy = insts[copy_at]
            self.assertEqual(copy.get("stream"), "STREAM_D2H",
                             "%s: the host update reads %s, not a d2h copy"
                             % (opt["name"], tensors[host_grad]))
            grads.append((copy["inputs"][0], copy_at))
        last_backward = max(producer[g] for g, _ in grads)
        for grad, copy_at in grads:
            crossings = [k for k, i in d2h if i["inputs"][0] == grad]
            self.assertEqual(len(crossings), 1, "gradient %s crosses to the host %d times"
                             % (tensors[grad], len(crossings)))
            # Each copy is issued straight after its gradient is complete, so
            # every gradient but the last leaves while backward still runs.
            if producer[grad] < last_backward:
                self.assertLess(copy_at, last_backward,
                                "gradient %s leaves only after backward ended"
                                % tensors[grad])
            self.assertFalse(any(producer[grad] < k < copy_at and
                                 insts[k].get("stream") == "STREAM_COMPUTE" and
                                 insts[k]["op"] == "CheckFiniteGrads" for k in range(len(insts))),
                             "the copy of %s waits for the overflow check" % tensors[grad])

    def test_fp16_offloaded_optimizer(self):
        self.check_each_gradient_crosses_once(
            "--precision=fp16", "--offload-optimizer=cpu", "--offload-params=cpu")

    def test_fp16_optimizer_on_nvme(self):
        self.check_each_gradient_crosses_once(
            "--precision=fp16", "--offload-optimizer=nvme", "--offload-params=cpu")


if __name__ == "__main__":
    unittest.main()
