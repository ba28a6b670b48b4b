//===- Parser.h - The IR's text form: parsing -----------------------------===//
//
// Reads what printGraph writes (see Printer.h for the form). Names are
// resolved over the whole graph, so a value may be used before the line
// that defines it: the parser only rejects what it cannot build (a name
// nobody defines, a value defined twice); ordering is the verifier's job.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_IR_PARSER_H
#define ZINC_IR_PARSER_H

#include "zinc/ir/Graph.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace zinc::ir {

/// Parses one graph. Errors read "<bufferName>:<line>:<col>: <what>".
llvm::Expected<std::unique_ptr<Graph>> parseGraph(llvm::StringRef text,
                                                  llvm::StringRef bufferName);

} // namespace zinc::ir

#endif
