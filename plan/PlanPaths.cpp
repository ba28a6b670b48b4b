//===- PlanPaths.cpp - The files a plan makes zinc-run read ---------------===//
#include "zinc/plan/PlanPaths.h"
#include "zinc/support/Error.h"
#include "zinc/support/FileInside.h"
#include "llvm/Support/Path.h"

namespace zinc::plan {

std::string compiledModelDir(const Plan &plan) {
  return llvm::sys::path::parent_path(plan.model_path()).str();
}

std::string modelFileName(const Plan &plan) {
  return llvm::sys::path::filename(plan.model_path()).str();
}

llvm::Expected<std::string> externalDataPath(const Plan &plan,
                                             const InitializerSource &src) {
  llvm::StringRef file = src.file();
  std::string dir = compiledModelDir(plan);
  if (llvm::sys::path::is_absolute(file) && !dir.empty()) {
    if (!llvm::StringRef(dir).endswith("/"))
      dir += "/";
    file.consume_front(dir);
  }
  llvm::Expected<std::string> relative = normalizeRelativePath(file);
  if (!relative)
    return makeError("initializer '" + src.name() +
                     "': the plan's external data path '" + src.file() + "' " +
                     llvm::toString(relative.takeError()) +
                     "; a plan names external data inside the model's "
                     "directory");
  return relative;
}

llvm::Error verifyPlanPaths(const Plan &plan) {
  llvm::StringRef model = plan.model_path();
  llvm::StringRef name = llvm::sys::path::filename(model);
  if (!llvm::sys::path::is_absolute(model) || name.empty() || name == "." ||
      name == ".." || model.contains('\0'))
    return makeError("the plan's model path '" + model +
                     "' is not the absolute path of a file");
  for (const Tensor &t : plan.tensors())
    if (t.has_init() && !t.init().file().empty())
      if (llvm::Expected<std::string> path = externalDataPath(plan, t.init());
          !path)
        return path.takeError();
  return llvm::Error::success();
}

} // namespace zinc::plan
