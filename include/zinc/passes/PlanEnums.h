//===- PlanEnums.h - The plan's names for the IR's roles, tiers, streams --===//
#ifndef ZINC_PASSES_PLANENUMS_H
#define ZINC_PASSES_PLANENUMS_H

#include "zinc/ir/Graph.h"
#include "zinc/plan/PlanFile.h"

namespace zinc {

inline plan::Role toPlanRole(ir::ValueRole r) {
  switch (r) {
  case ir::ValueRole::Input: return plan::ROLE_INPUT;
  case ir::ValueRole::Parameter: return plan::ROLE_PARAMETER;
  case ir::ValueRole::Constant: return plan::ROLE_CONSTANT;
  case ir::ValueRole::Activation: return plan::ROLE_ACTIVATION;
  case ir::ValueRole::State: return plan::ROLE_STATE;
  case ir::ValueRole::ModelState: return plan::ROLE_MODEL_STATE;
  }
  return plan::ROLE_ACTIVATION;
}

inline plan::Tier toPlanTier(ir::Tier t) {
  switch (t) {
  case ir::Tier::Gpu: return plan::TIER_GPU;
  case ir::Tier::Cpu: return plan::TIER_CPU;
  case ir::Tier::Nvme: return plan::TIER_NVME;
  }
  return plan::TIER_GPU;
}

inline plan::Stream toPlanStream(ir::Stream s) {
  switch (s) {
  case ir::Stream::Compute: return plan::STREAM_COMPUTE;
  case ir::Stream::H2D: return plan::STREAM_H2D;
  case ir::Stream::D2H: return plan::STREAM_D2H;
  case ir::Stream::Nvme: return plan::STREAM_NVME;
  case ir::Stream::Collective: return plan::STREAM_COLLECTIVE;
  case ir::Stream::Host: return plan::STREAM_HOST;
  }
  return plan::STREAM_COMPUTE;
}

} // namespace zinc

#endif
