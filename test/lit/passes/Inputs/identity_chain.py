"""Writes a graph of N Identity nodes in a chain ending in one Relu, in the
IR's text form: each forward of dce moves one more reader onto the chain's
first value, so a pass that walks that value's use list per node is
quadratic here. Usage: identity_chain.py N"""
import sys

n = int(sys.argv[1])
lines = ['graph "identity-chain" {', "  input %v0 : f32[4]"]
for i in range(n):
    lines.append(f'  %v{i + 1} : f32[4] = Identity(%v{i}) name "id{i}"')
lines.append(f'  %y : f32[4] = Relu(%v{n}) name "relu"')
lines.append("  output %y")
lines.append("}")
sys.stdout.write("\n".join(lines) + "\n")
