//===- RowMath.cpp - The scalar loops and the choice of ISA ---------------===//
#define ZINC_SIMD_MATH_FN
#include "RowMathBody.h"
#include <cstdlib>

namespace zinc::cpu {

#if ZINC_SIMD_X86
const RowMath &rowMathAvx512();
const RowMath &rowMathAvx2();
#endif

static const RowMath &rowMathScalar() {
  static const RowMath m =
      rowmath::makeRowMath<simd::Scalar>(simd::IsaKind::Scalar);
  return m;
}

const RowMath &rowMathFor(simd::IsaKind isa) {
  switch (isa) {
#if ZINC_SIMD_X86
  case simd::IsaKind::Avx512:
    return rowMathAvx512();
  case simd::IsaKind::Avx2:
    return rowMathAvx2();
#endif
  default:
    return rowMathScalar();
  }
}

const RowMath &rowMath() {
  static const RowMath &best = rowMathFor(simd::bestIsa());
  return best;
}

} // namespace zinc::cpu
