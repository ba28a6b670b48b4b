//===- TriangularGemm.h - GEMMs that skip a triangle of zeros -------------===//
//
// Causal attention multiplies by matrices that are zero above their
// diagonal (the masked softmax and its gradient) and keeps only the lower
// triangle of the scores it computes. Half of each of its six [T,T]
// products is then known zeros. BLAS cannot be told so, and cutting its
// calls into row blocks does not pay: OpenBLAS's fixed cost per call eats
// the saving at attention's sizes (head width 64, T a few hundred). This
// GEMM packs the operands itself and skips every register tile whose terms
// are all known zero, so it does about half the work of the full product.
//
// Which half is known (the triangular-products pass proves it, and sets
// the FusedMatMul attributes lowerA, lowerB and lowerY):
//  - LowerY: C is square and only its lower triangle is wanted; the
//    entries above its diagonal are written as zeros.
//  - LowerOpA / UpperOpA: op(A) is square and zero above (below) its
//    diagonal; terms there are skipped, not read.
//  - LowerOpB / UpperOpB: the same for op(B).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CPU_KERNELS_TRIANGULARGEMM_H
#define ZINC_RUNTIME_CPU_KERNELS_TRIANGULARGEMM_H

#include "TeamGemm.h"

namespace zinc::cpu {

enum class Triangle { None, LowerY, LowerOpA, UpperOpA, LowerOpB, UpperOpB };

/// The triangle of a FusedMatMul's attributes (lowerA / lowerB name the
/// stored operand, so a transposed one is upper), or None. Fails (returns
/// false) when more than one is set.
bool triangleOf(bool lowerA, bool lowerB, bool lowerY, bool transA,
                bool transB, Triangle &out);

/// Whether `g` has the square shape that `t` needs.
bool triangleFits(Triangle t, int64_t m, int64_t n, int64_t k);

/// g on the calling thread, skipping the terms `t` says are zero (and, for
/// LowerY, zeroing C above its diagonal). The stack holds its packed
/// panels: it allocates nothing.
void triangularGemm(const GemmArgs<float> &g, Triangle t);

} // namespace zinc::cpu

#endif
