//===- PlanPicture.cpp - Memory per tier and the stream timeline as SVG ---===//
#include "zinc/plan/PlanPicture.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace zinc::plan {

const char *memoryClassName(MemoryClass c) {
  switch (c) {
  case MemoryClass::Parameters: return "parameters";
  case MemoryClass::Gradients: return "gradients";
  case MemoryClass::OptimizerStates: return "optimizer states";
  case MemoryClass::Activations: return "activations";
  case MemoryClass::Checkpoints: return "checkpoints and spills";
  case MemoryClass::Workspace: return "kernel workspace";
  }
  return "?";
}

namespace {

constexpr const char *kClassColors[kNumMemoryClasses] = {"#4e79a7", "#e15759", "#f28e2b",
                                                         "#59a14f", "#b07aa1", "#9c9c9c"};
constexpr const char *kStreamColors[kNumStreams] = {"#4e79a7", "#f28e2b", "#edc948",
                                                    "#b07aa1", "#e15759", "#59a14f"};
constexpr double kWidth = 1000;    // plot width, pixels
constexpr double kLeft = 150;      // room for labels
constexpr double kTierHeight = 150;
constexpr double kRowHeight = 18;

bool persistent(Role role) {
  return role == ROLE_INPUT || role == ROLE_PARAMETER || role == ROLE_CONSTANT ||
         role == ROLE_STATE || role == ROLE_MODEL_STATE;
}

/// Each tensor's class: by its role, and for copies and temporaries by
/// their names (`<param>@gpu`, `.../grad/...`, `@spill`, `@refetch`).
std::vector<MemoryClass> classifyAll(const Plan &plan) {
  std::vector<MemoryClass> out(plan.tensors_size(), MemoryClass::Activations);
  llvm::StringMap<MemoryClass> homes;
  for (const Tensor &t : plan.tensors()) {
    MemoryClass c = MemoryClass::Activations;
    if (t.role() == ROLE_PARAMETER || t.role() == ROLE_CONSTANT || t.role() == ROLE_MODEL_STATE)
      c = MemoryClass::Parameters;
    else if (t.role() == ROLE_STATE)
      c = MemoryClass::OptimizerStates;
    if (t.role() != ROLE_ACTIVATION && t.role() != ROLE_INPUT)
      homes[t.name()] = c;
    if (t.id() < out.size())
      out[t.id()] = c;
  }
  for (const Tensor &t : plan.tensors()) {
    if (t.role() != ROLE_ACTIVATION || t.id() >= out.size())
      continue;
    llvm::StringRef name = t.name();
    MemoryClass c = MemoryClass::Activations;
    if (name.contains("@spill") || name.contains("@refetch"))
      c = MemoryClass::Checkpoints;
    else if (name.contains("/grad/") || name.contains(".grad"))
      c = MemoryClass::Gradients;
    else if (auto it = homes.find(name.split('@').first); it != homes.end())
      c = it->second; // a copy of a parameter or state in another tier
    out[t.id()] = c;
  }
  for (const Workspace &w : plan.workspaces())
    if (w.tensor() < out.size())
      out[w.tensor()] = MemoryClass::Workspace;
  return out;
}

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

using ClassBytes = std::array<double, kNumMemoryClasses>;

/// Per pixel column of the step, the bytes of each class live at the
/// column's busiest instant in `tier`.
std::vector<ClassBytes> liveColumns(const Plan &plan, const Prediction &pred,
                                    const std::vector<MemoryClass> &classes, Tier tier,
                                    const std::vector<double> &first,
                                    const std::vector<double> &last) {
  struct Change {
    double time;
    double bytes;
    unsigned cls;
  };
  std::vector<Change> changes;
  for (const Tensor &t : plan.tensors()) {
    if (t.tier() != tier || t.id() >= first.size() || first[t.id()] > last[t.id()])
      continue;
    unsigned c = static_cast<unsigned>(classes[t.id()]);
    changes.push_back({first[t.id()], static_cast<double>(t.size_bytes()), c});
    changes.push_back({last[t.id()], -static_cast<double>(t.size_bytes()), c});
  }
  // Frees before allocations at one instant: a buffer handed on is not
  // counted twice.
  std::sort(changes.begin(), changes.end(), [](const Change &a, const Change &b) {
    return a.time != b.time ? a.time < b.time : a.bytes < b.bytes;
  });
  size_t columns = static_cast<size_t>(kWidth);
  std::vector<ClassBytes> out(columns, ClassBytes{});
  std::vector<double> best(columns, -1);
  double step = std::max(pred.stepSeconds, 1e-12);
  auto column = [&](double t) {
    return std::min(columns - 1, static_cast<size_t>(std::max(0.0, t / step * kWidth)));
  };
  ClassBytes now{};
  for (size_t i = 0; i < changes.size();) {
    double t = changes[i].time;
    for (; i < changes.size() && changes[i].time == t; ++i)
      now[changes[i].cls] += changes[i].bytes;
    double until = i < changes.size() ? changes[i].time : step;
    double total = 0;
    for (double b : now)
      total += std::max(0.0, b);
    for (size_t c = column(t), end = column(until); c <= end; ++c)
      if (total > best[c]) {
        best[c] = total;
        out[c] = now;
      }
  }
  return out;
}

} // namespace

void writePlanSvg(const Plan &plan, const Prediction &pred, llvm::raw_ostream &os) {
  std::vector<MemoryClass> classes = classifyAll(plan);
  double step = std::max(pred.stepSeconds, 1e-12);
  // Live spans from the predicted timeline.
  std::vector<double> first(plan.tensors_size(), INFINITY), last(plan.tensors_size(), -INFINITY);
  for (int i = 0; i < plan.instructions_size() && i < static_cast<int>(pred.timeline.size()); ++i)
    for (const auto *ids : {&plan.instructions(i).inputs(), &plan.instructions(i).outputs()})
      for (int id : *ids)
        if (id >= 0 && id < plan.tensors_size()) {
          first[id] = std::min(first[id], pred.timeline[i].start);
          last[id] = std::max(last[id], pred.timeline[i].end);
        }
  for (const Tensor &t : plan.tensors())
    if (t.id() < first.size() && persistent(t.role())) {
      first[t.id()] = 0;
      last[t.id()] = step;
    }
  for (const Workspace &w : plan.workspaces())
    if (w.tensor() < first.size()) {
      first[w.tensor()] = 0;
      last[w.tensor()] = step;
    }

  bool present[kNumStreams] = {};
  for (const Instruction &inst : plan.instructions())
    if (static_cast<unsigned>(inst.stream()) < kNumStreams)
      present[inst.stream()] = true;
  unsigned rows = std::count(std::begin(present), std::end(present), true);
  double top = 60;
  double height = top + plan.tiers_size() * (kTierHeight + 30) + 40 + rows * kRowHeight + 60;
  double width = kLeft + kWidth + 200;
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv("<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">zinc plan: "
                      "{0}</text>\n",
                      escape(plan.model_path()));
  os << llvm::formatv("<text x=\"10\" y=\"42\">hw {0}, {1} rank(s), ZeRO stage {2}: predicted "
                      "step {3} (lower bound {4}, {5}-bound), overlap efficiency {6:f2}</text>\n",
                      escape(plan.hw()), std::max(1u, plan.ranks()), plan.zero_stage(),
                      secondsText(pred.stepSeconds), secondsText(pred.lowerBoundSeconds),
                      streamName(pred.bottleneck), pred.overlapEfficiency());

  double y = top;
  for (const TierInfo &info : plan.tiers()) {
    const char *tierName = info.tier() == TIER_GPU   ? "GPU"
                           : info.tier() == TIER_CPU ? "CPU"
                                                     : "NVMe";
    std::vector<ClassBytes> cols = liveColumns(plan, pred, classes, info.tier(), first, last);
    double maxLive = 0;
    for (const ClassBytes &c : cols) {
      double total = 0;
      for (double b : c)
        total += std::max(0.0, b);
      maxLive = std::max(maxLive, total);
    }
    double scale = std::max({maxLive, static_cast<double>(info.peak()), 1.0});
    bool showCapacity = info.capacity() && info.capacity() <= 1.25 * scale;
    if (showCapacity)
      scale = std::max(scale, static_cast<double>(info.capacity()));
    scale *= 1.05;
    double base = y + kTierHeight;
    auto yOf = [&](double bytes) { return base - bytes / scale * kTierHeight; };
    os << llvm::formatv("<text x=\"10\" y=\"{0}\" font-weight=\"bold\">{1} tier</text>\n", y + 14,
                        tierName);
    os << llvm::formatv("<text x=\"10\" y=\"{0}\">proven peak {1}</text>\n", y + 30,
                        bytesText(info.peak()));
    if (info.capacity())
      os << llvm::formatv("<text x=\"10\" y=\"{0}\">capacity {1}</text>\n", y + 46,
                          bytesText(info.capacity()));
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"#f7f7f7\" "
                        "stroke=\"#ccc\"/>\n",
                        kLeft, y, kWidth, kTierHeight);
    // Stacked classes: each a step-shaped band over the columns.
    std::vector<ClassBytes> cum(cols.size(), ClassBytes{});
    for (size_t c = 0; c < cols.size(); ++c) {
      double sum = 0;
      for (unsigned k = 0; k < kNumMemoryClasses; ++k) {
        sum += std::max(0.0, cols[c][k]);
        cum[c][k] = sum;
      }
    }
    for (unsigned k = 0; k < kNumMemoryClasses; ++k) {
      bool any = false;
      for (size_t c = 0; c < cols.size() && !any; ++c)
        any = cols[c][k] > 0;
      if (!any)
        continue;
      std::string path;
      for (size_t c = 0; c < cum.size(); ++c) {
        double yTop = yOf(cum[c][k]);
        path += llvm::formatv("{0}{1:f1},{2:f2} L{3:f1},{2:f2} ", c ? "L" : "M", kLeft + c,
                              yTop, kLeft + c + 1)
                    .str();
      }
      for (size_t c = cum.size(); c-- > 0;) {
        double yBottom = yOf(k ? cum[c][k - 1] : 0);
        path += llvm::formatv("L{0:f1},{1:f2} L{2:f1},{1:f2} ", kLeft + c + 1, yBottom, kLeft + c)
                    .str();
      }
      os << llvm::formatv("<path d=\"{0}Z\" fill=\"{1}\" stroke=\"none\"><title>{2}</title></path>\n",
                          path, kClassColors[k], memoryClassName(static_cast<MemoryClass>(k)));
    }
    os << llvm::formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:f2}\" y2=\"{2:f2}\" stroke=\"black\" "
                        "stroke-dasharray=\"6,3\"/><text x=\"{3}\" y=\"{4:f2}\">proven peak</text>\n",
                        kLeft, kLeft + kWidth, yOf(info.peak()), kLeft + kWidth + 6,
                        yOf(info.peak()) + 4);
    if (showCapacity)
      os << llvm::formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:f2}\" y2=\"{2:f2}\" stroke=\"red\"/>"
                          "<text x=\"{3}\" y=\"{4:f2}\" fill=\"red\">capacity</text>\n",
                          kLeft, kLeft + kWidth, yOf(info.capacity()), kLeft + kWidth + 6,
                          yOf(info.capacity()) + 4);
    y += kTierHeight + 30;
  }

  // Legend of the classes.
  double lx = kLeft;
  for (unsigned k = 0; k < kNumMemoryClasses; ++k) {
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"{2}\"/>"
                        "<text x=\"{3}\" y=\"{4}\">{5}</text>\n",
                        lx, y - 20, kClassColors[k], lx + 16, y - 10,
                        memoryClassName(static_cast<MemoryClass>(k)));
    lx += 175;
  }
  y += 10;
  // The streams: busy intervals, merged where they meet within a pixel.
  for (unsigned s = 0; s < kNumStreams; ++s) {
    if (!present[s])
      continue;
    os << llvm::formatv("<text x=\"10\" y=\"{0}\">{1} ({2:f0}% busy)</text>\n", y + 13,
                        streamName(static_cast<Stream>(s)),
                        100 * pred.busySeconds[s] / step);
    double open = -1, close = -1;
    auto flush = [&]() {
      if (open < 0)
        return;
      os << llvm::formatv("<rect x=\"{0:f2}\" y=\"{1}\" width=\"{2:f2}\" height=\"{3}\" "
                          "fill=\"{4}\"/>\n",
                          kLeft + open, y + 2, std::max(0.5, close - open), kRowHeight - 4,
                          kStreamColors[s]);
    };
    for (int i = 0; i < plan.instructions_size() && i < static_cast<int>(pred.timeline.size()); ++i) {
      if (static_cast<unsigned>(plan.instructions(i).stream()) != s)
        continue;
      double x0 = pred.timeline[i].start / step * kWidth;
      double x1 = pred.timeline[i].end / step * kWidth;
      if (open >= 0 && x0 <= close + 0.5) {
        close = std::max(close, x1);
        continue;
      }
      flush();
      open = x0;
      close = x1;
    }
    flush();
    y += kRowHeight;
  }
  // The time axis.
  for (int tick = 0; tick <= 5; ++tick) {
    double x = kLeft + tick * kWidth / 5;
    os << llvm::formatv("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#999\"/>"
                        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                        x, y + 2, y + 8, y + 22, secondsText(step * tick / 5));
  }
  os << "</svg>\n";
}

} // namespace zinc::plan
