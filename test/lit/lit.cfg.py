# lit configuration for zinc's pass- and tool-level tests.
import os
import lit.formats

config.name = "zinc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".onnxtxt", ".zir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
# Outputs (%t) go to the build tree, never the source tree.
config.test_exec_root = config.zinc_obj_root
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
config.environment["PATH"] = os.pathsep.join(
    [config.zinc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%python", "/usr/bin/python3"))
if config.zinc_cuda:
    config.available_features.add("cuda")
# A machine with a CUDA device: tests of what zinc-run says without one
# do not apply there.
import shutil
import subprocess
if shutil.which("nvidia-smi"):
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, timeout=20).stdout
        if b"GPU" in listed:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.SubprocessError):
        pass
