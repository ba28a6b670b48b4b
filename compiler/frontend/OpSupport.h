//===- OpSupport.h - Which ONNX nodes zinc accepts, from Ops.def ----------===//
#ifndef ZINC_COMPILER_FRONTEND_OPSUPPORT_H
#define ZINC_COMPILER_FRONTEND_OPSUPPORT_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace zinc::frontend {

/// The value of a tensor known when compiling, by name: an inline
/// initializer or the output of a Constant node; null when there is none.
using ConstantLookup =
    llvm::function_ref<const onnx::TensorProto *(llvm::StringRef)>;

/// The ONNX element type code of a value after shape inference; 0 when
/// unknown.
using ElementTypeLookup = llvm::function_ref<int(llvm::StringRef)>;

/// Refuses a node whose op zinc does not implement: not in Ops.def, outside
/// the default domain, or used in a way the op's rule refuses (Dropout
/// whose training_mode is not a constant, ...). The error does not name the
/// node; the caller does.
llvm::Error checkOpSupported(const onnx::NodeProto &node,
                             ConstantLookup constants);

/// Refuses a node with an input or output whose element type zinc has no
/// DType for, or that is outside the op's set in Ops.def. Values of unknown
/// type are skipped: the static-shape check reports them.
llvm::Error checkElementTypes(const onnx::NodeProto &node,
                              ElementTypeLookup elemTypeOf);

} // namespace zinc::frontend

#endif
