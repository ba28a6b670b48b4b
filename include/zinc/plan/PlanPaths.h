//===- PlanPaths.h - The files a plan makes zinc-run read -----------------===//
//
// A plan is shared and downloaded like a model, so what it names must not
// reach past the model it was compiled from. It names the model by the
// absolute path it had at compile time (model_path) and each external-data
// file relative to that model's directory (InitializerSource.file). At run
// time both are read from one directory, zinc-run --model-dir or by default
// the directory model_path names, through FileInside.h: realpath inside
// that directory, regular files only.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANPATHS_H
#define ZINC_PLAN_PLANPATHS_H

#include "Plan.pb.h"
#include "llvm/Support/Error.h"
#include <string>

namespace zinc::plan {

/// The directory the plan's model was in when it was compiled.
std::string compiledModelDir(const Plan &plan);

/// The model's file name, which the runtime looks for in the model
/// directory it is given.
std::string modelFileName(const Plan &plan);

/// The path of `src`'s external data relative to the model directory, its
/// text checked (normalizeRelativePath). Plans written before paths were
/// relative name the file absolutely; such a path is taken relative to
/// compiledModelDir when it lies below it, and refused otherwise.
llvm::Expected<std::string> externalDataPath(const Plan &plan,
                                             const InitializerSource &src);

/// Checks by text alone every path the plan makes zinc-run read: model_path
/// absolute and naming a file, every external-data path inside the model's
/// directory. zinc-dump --verify and zinc-run run it before anything else.
llvm::Error verifyPlanPaths(const Plan &plan);

} // namespace zinc::plan

#endif
