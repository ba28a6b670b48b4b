//===- KernelWorkspace.h - The scratch bytes a cpu kernel call takes ------===//
//
// Kernels take no memory from the heap: what they need beside their operands
// (im2col columns, a 16-bit GEMM's widened blocks, per-row statistics) comes
// from a workspace, one buffer per stream that the compiler plans in the
// stream's tier like any other buffer, so the proven peak includes it. This
// is the one definition of how much a call takes: the compiler sizes each
// stream's workspace as the largest need of its kernels, the runtime checks
// the plan against it at load and gives each call exactly that many bytes,
// and the kernels carve their pieces with the same rounding
// (workspacePiece). Which function sizes an op is its Workspace column in
// Ops.def; this library (zinc_ops) is what the compiler and the runtime both
// read, so the compiler links no kernel.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_OPS_KERNELWORKSPACE_H
#define ZINC_OPS_KERNELWORKSPACE_H

#include "zinc/support/Attribute.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <algorithm>
#include <cstdint>

namespace zinc {

/// An operand as the sizing sees it: its type and shape, or absent (an
/// optional input or output the node leaves out).
struct KernelOperand {
  DType dtype = DType::F32;
  llvm::ArrayRef<int64_t> shape;
  bool present = false;
};

/// Every piece a kernel takes from its workspace starts on this boundary.
constexpr uint64_t kWorkspaceAlignment = 64;

/// The bytes a piece of `bytes` takes from a workspace.
constexpr uint64_t workspacePiece(uint64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
         kWorkspaceAlignment;
}

/// 16-bit float GEMMs (MatMul, Gemm) widen their operands to f32 a block at a
/// time: Y[M,N] is computed in blocks of at most kWidenBlockM x kWidenBlockN,
/// summing over K in steps of at most kWidenBlockK (at most 5 MiB of
/// workspace; blocks this large keep the sgemm calls efficient, within
/// about a quarter of widening whole operands at a [2048,768]x[768,3072]).
constexpr int64_t kWidenBlockM = 512;
constexpr int64_t kWidenBlockN = 1024;
constexpr int64_t kWidenBlockK = 512;

/// Upper bound on the elements of one im2col column tile (16 MiB of f32):
/// still thousands of GEMM columns for any realistic channels * taps.
constexpr int64_t kConvColumnBudget = int64_t(4) << 20;

/// Lines of output positions per column tile for `rows` column rows, lines
/// of `len` positions, `lines` lines in all.
inline int64_t convLinesPerTile(int64_t rows, int64_t len, int64_t lines) {
  len = std::max<int64_t>(len, 1);
  return std::clamp<int64_t>(kConvColumnBudget /
                                 std::max<int64_t>(rows * len, 1),
                             1, std::max<int64_t>(lines, 1));
}

/// Collectives reduce 16-bit floats in f32 (a sum of two scaled fp16
/// gradients may pass 65504 when their mean does not), this many elements
/// at a time: at most 4 MiB of workspace.
constexpr int64_t kCollectiveChunkElements = int64_t(1) << 20;

/// One kernel call as its workspace function sees it.
struct WorkspaceQuery {
  llvm::StringRef op;
  int64_t opsetVersion = 0;
  llvm::ArrayRef<KernelOperand> inputs;
  llvm::ArrayRef<KernelOperand> outputs;
  const AttributeList &attrs;
};

/// An op's Workspace column (Ops.def): the bytes of one call.
using WorkspaceFn = uint64_t (*)(const WorkspaceQuery &);

/// Bytes of workspace the cpu kernel of `domain`.`op` takes for one call
/// with these operands and attributes: the sum of its pieces, each rounded
/// by workspacePiece; 0 for most kernels. An upper bound where the shapes
/// alone do not settle it (the axes of a reduction given as a tensor).
uint64_t kernelWorkspaceBytes(llvm::StringRef domain, llvm::StringRef op,
                              int64_t opsetVersion,
                              llvm::ArrayRef<KernelOperand> inputs,
                              llvm::ArrayRef<KernelOperand> outputs,
                              const AttributeList &attrs);

} // namespace zinc

#endif
