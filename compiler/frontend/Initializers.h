//===- Initializers.h - Initializers as references, never as bytes --------===//
#ifndef ZINC_COMPILER_FRONTEND_INITIALIZERS_H
#define ZINC_COMPILER_FRONTEND_INITIALIZERS_H

#include "onnx/onnx_pb.h"
#include "zinc/ir/Graph.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include <functional>
#include <vector>

namespace zinc::frontend {

/// What the frontend keeps of one initializer: its type and where its bytes
/// are. Enough for the IR; the bytes themselves stay on disk.
struct InitializerInfo {
  /// ONNX element type code (may be one zinc cannot hold; the support check
  /// reports it).
  int elemType = 0;
  llvm::SmallVector<int64_t, 4> shape;
  ir::InitializerRef ref;
};

using WarningHandler = std::function<void(const llvm::Twine &)>;

/// Records every initializer of `graph` in order and validates what can be
/// validated without reading weights: dimensions, the size of inline data,
/// and the external-data fields (a location inside `modelDir`, by its text
/// and by realpath, integer offset and length that match the tensor's
/// size). `modelDir` is absolute; each external file is recorded relative
/// to it. A missing, short or irregular external file is a warning (once
/// per file), not an error: a plan can be made before the weights exist.
llvm::Expected<std::vector<InitializerInfo>>
collectInitializers(const onnx::GraphProto &graph, llvm::StringRef modelDir,
                    const WarningHandler &warn);

/// Takes the initializers whose data is in external files out of `graph`
/// and declares each as a graph input of the same type instead. onnx's
/// checker stats external files (and rejects missing ones) and its shape
/// inference cannot read them, so neither gets to see them; their fields
/// were validated by collectInitializers.
void detachExternalInitializers(onnx::GraphProto &graph);

} // namespace zinc::frontend

#endif
