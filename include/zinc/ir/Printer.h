//===- Printer.h - The IR's text form: printing
//----------------------------===//
//
// The text form is what --print-after-all shows and what lit tests check:
//
//   graph "tiny" opset 17 model "/abs/model.onnx" {
//     input %x : f32[2,3]
//     param %w : f32[3,4] init "w" external "w.bin" offset 0 length 48
//     %y : f32[2,4] = MatMul(%x, %w) name "MatMul_0"
//     %a : f32[2,2], none = Split(%y) name "s" {axis = 1 : int}
//     output %y, %a
//   }
//
// Printing, parsing and printing again gives identical text. The printer
// prints any Graph, invalid ones included, so a broken pass can be debugged
// from its dump; states the text form cannot express (a node output with
// role param, a graph input that is also a node output) print in the
// nearest expressible form, and the verifier rejects all of them.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_IR_PRINTER_H
#define ZINC_IR_PRINTER_H

#include "zinc/ir/Graph.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace zinc::ir {

/// Prints `g` in the text form that parseGraph reads back.
void printGraph(const Graph &g, llvm::raw_ostream &os);

/// Prints a value reference: %name, or %"quoted name" when the name is not
/// a simple identifier.
void printValueName(llvm::StringRef name, llvm::raw_ostream &os);
/// printValueName into a string, for diagnostics.
std::string formatValueName(llvm::StringRef name);

/// Prints a double so that parsing the text gives back the identical bits:
/// shortest round-trip decimal, inf/-inf, and NaNs as their bit pattern
/// (0x7FF8000000000000).
void printDouble(double d, llvm::raw_ostream &os);

/// Prints an attribute's value and kind: `1 : int`, `[1, 2] : ints`,
/// `[3, 4] : tensor<i64[2]>`, `"0x0000803F" : tensor<f32[1]>`.
void printAttributeValue(const Attribute &a, llvm::raw_ostream &os);

} // namespace zinc::ir

#endif
