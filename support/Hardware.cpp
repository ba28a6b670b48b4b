//===- Hardware.cpp - Hardware presets and JSON descriptions --------------===//
#include "zinc/support/Hardware.h"
#include "zinc/support/BoundedJson.h"
#include "zinc/support/Error.h"
#include "zinc/support/Size.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <cmath>
#include <unistd.h>

namespace zinc {

namespace {

/// The presets: hw/<name>.json, embedded by cmake/HardwarePresets.cmake.
struct Preset {
  const char *name;
  const char *json;
};
const Preset kPresets[] = {
#include "zinc/HardwarePresets.inc"
};

constexpr uint64_t TB = 1000ull * 1000 * 1000 * 1000;

/// "cpu": this machine, whose cores also stand in for the GPU (the cpu
/// backend emulates the GPU tier in host memory, so the physical memory is
/// split between the two tiers). The rates are conservative figures for a
/// small server core pair; `zinc-run --calibrate` is where measured ones
/// will come from.
Hardware thisMachine() {
  Hardware hw;
  hw.name = "cpu";
  uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                      static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  hw.gpuMem = physical / 4;
  hw.cpuMem = physical / 2;
  hw.nvmeMem = 1 * TB;
  hw.gpusPerNode = 1;
  hw.gpuFlopsFp32 = hw.gpuFlopsHalf = 100e9;
  hw.gpuMemBandwidth = 20e9;
  hw.kernelLaunchSeconds = 2e-6;
  hw.gemmLaunchSeconds = 10e-6;
  hw.eventWaitSeconds = 20e-6;
  hw.copyEngines = false; // The cpu backend copies on its own cores.
  hw.hostToDeviceBandwidth = hw.deviceToHostBandwidth = 10e9;
  hw.gpusPerHostLink = 1;
  hw.cpuMemBandwidth = 20e9;
  hw.cpuAdamParamsPerSecond = 20e9 / 28;
  hw.nvmeReadBandwidth = 2e9;
  hw.nvmeWriteBandwidth = 2e9;
  hw.intraNodeBandwidth = 5e9;
  hw.intraNodeLatency = 20e-6;
  hw.interNodeBandwidth = 1e9;
  hw.interNodeLatency = 50e-6;
  return hw;
}

/// Rates must be positive; durations (latencies, launch costs) may be 0.
enum class FieldKind { Size, Count, Rate, Seconds, Flag };

struct Field {
  const char *key;
  FieldKind kind;
  uint64_t Hardware::*size = nullptr;
  unsigned Hardware::*count = nullptr;
  double Hardware::*rate = nullptr;
  bool Hardware::*flag = nullptr;
};

Field sizeField(const char *key, uint64_t Hardware::*m) { return {key, FieldKind::Size, m}; }
Field countField(const char *key, unsigned Hardware::*m) {
  return {key, FieldKind::Count, nullptr, m};
}
Field rateField(const char *key, double Hardware::*m) {
  return {key, FieldKind::Rate, nullptr, nullptr, m};
}
Field secondsField(const char *key, double Hardware::*m) {
  return {key, FieldKind::Seconds, nullptr, nullptr, m};
}
Field flagField(const char *key, bool Hardware::*m) {
  return {key, FieldKind::Flag, nullptr, nullptr, nullptr, m};
}

const std::vector<Field> &fields() {
  static const std::vector<Field> table = {
      sizeField("gpu_mem", &Hardware::gpuMem),
      sizeField("cpu_mem", &Hardware::cpuMem),
      sizeField("nvme_mem", &Hardware::nvmeMem),
      countField("gpus_per_node", &Hardware::gpusPerNode),
      rateField("gpu_flops_fp32", &Hardware::gpuFlopsFp32),
      rateField("gpu_flops_fp16", &Hardware::gpuFlopsHalf),
      rateField("gpu_mem_bandwidth", &Hardware::gpuMemBandwidth),
      secondsField("kernel_launch_seconds", &Hardware::kernelLaunchSeconds),
      secondsField("gemm_launch_seconds", &Hardware::gemmLaunchSeconds),
      secondsField("event_wait_seconds", &Hardware::eventWaitSeconds),
      flagField("copy_engines", &Hardware::copyEngines),
      secondsField("preemption_seconds", &Hardware::preemptionSeconds),
      rateField("h2d_bandwidth", &Hardware::hostToDeviceBandwidth),
      rateField("d2h_bandwidth", &Hardware::deviceToHostBandwidth),
      countField("gpus_per_host_link", &Hardware::gpusPerHostLink),
      rateField("cpu_mem_bandwidth", &Hardware::cpuMemBandwidth),
      rateField("cpu_adam_params_per_second", &Hardware::cpuAdamParamsPerSecond),
      rateField("nvme_read_bandwidth", &Hardware::nvmeReadBandwidth),
      rateField("nvme_write_bandwidth", &Hardware::nvmeWriteBandwidth),
      secondsField("nvme_read_latency_seconds", &Hardware::nvmeReadLatencySeconds),
      secondsField("nvme_write_latency_seconds", &Hardware::nvmeWriteLatencySeconds),
      rateField("intra_node_bandwidth", &Hardware::intraNodeBandwidth),
      secondsField("intra_node_latency", &Hardware::intraNodeLatency),
      rateField("inter_node_bandwidth", &Hardware::interNodeBandwidth),
      secondsField("inter_node_latency", &Hardware::interNodeLatency),
  };
  return table;
}

/// A list of [x, seconds] points, x positive and increasing, seconds not
/// negative; `what` names it and `x` its abscissa in errors.
llvm::Expected<KernelTimePoints> parseTimePoints(const llvm::json::Value &list,
                                                 const std::string &what, const char *x) {
  const llvm::json::Array *points = list.getAsArray();
  if (!points || points->empty())
    return makeError(what + " must be a non-empty list of [" + x + ", seconds]");
  KernelTimePoints parsed;
  for (const llvm::json::Value &point : *points) {
    const llvm::json::Array *pair = point.getAsArray();
    llvm::Optional<double> n, s;
    if (pair && pair->size() == 2) {
      n = (*pair)[0].getAsNumber();
      s = (*pair)[1].getAsNumber();
    }
    if (!n || !s || !std::isfinite(*n) || !std::isfinite(*s) || *n <= 0 || *s < 0)
      return makeError(what + ": each point must be [" + x + " > 0, seconds >= 0]");
    if (!parsed.empty() && *n <= parsed.back().first)
      return makeError(what + ": the " + x + " must increase from point to point");
    parsed.emplace_back(*n, *s);
  }
  return parsed;
}

/// "kernel_seconds": {"<op>": [[elements, seconds], ...], ...}.
llvm::Error parseKernelTimes(const llvm::json::Value &value, llvm::StringRef where,
                             Hardware &hw) {
  std::string what = (where + ": kernel_seconds").str();
  const llvm::json::Object *ops = value.getAsObject();
  if (!ops)
    return makeError(what + " must be an object of op names");
  hw.kernelTimes.clear();
  for (const auto &[op, list] : *ops) {
    auto points = parseTimePoints(list, what + "." + std::string(llvm::StringRef(op)), "elements");
    if (!points)
      return points.takeError();
    hw.kernelTimes[std::string(llvm::StringRef(op))] = std::move(*points);
  }
  return llvm::Error::success();
}

/// A point list as JSON.
llvm::json::Array timePointsJson(const KernelTimePoints &points) {
  llvm::json::Array list;
  for (const auto &[x, seconds] : points)
    list.push_back(llvm::json::Array{x, seconds});
  return list;
}

/// Reads a description's fields over `hw`; `where` names it in errors.
llvm::Error parseDescription(llvm::StringRef text, llvm::StringRef where, Hardware &hw) {
  auto json = parseJson(text);
  if (!json)
    return makeError(where + ": not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *o = json->getAsObject();
  if (!o)
    return makeError(where + ": expected a JSON object");
  for (const auto &[key, value] : *o) {
    llvm::StringRef k(key);
    if (k == "name") {
      auto name = value.getAsString();
      if (!name || name->empty())
        return makeError(where + ": name must be a non-empty string");
      hw.name = name->str();
      continue;
    }
    // Documentation that travels with the numbers (`calibration`: the raw
    // figures zinc-run --calibrate --backend=cuda derived them from).
    if (k == "description" || k == "sources" || k == "calibration")
      continue;
    if (k == "kernel_seconds") {
      if (auto err = parseKernelTimes(value, where, hw))
        return err;
      continue;
    }
    if (k == "product_seconds") {
      auto points = parseTimePoints(value, (where + ": product_seconds").str(), "FLOPs");
      if (!points)
        return points.takeError();
      hw.productTimes = std::move(*points);
      continue;
    }
    auto field = std::find_if(fields().begin(), fields().end(),
                              [&](const Field &f) { return k == f.key; });
    if (field == fields().end())
      return makeError(where + ": unknown field '" + k + "' (docs/hardware.md lists them)");
    switch (field->kind) {
    case FieldKind::Size: {
      uint64_t bytes;
      if (auto n = value.getAsUINT64()) {
        bytes = *n;
      } else if (auto s = value.getAsString()) {
        auto size = parseSize(*s);
        if (!size)
          return addContext(size.takeError(), where + ": " + k);
        bytes = *size;
      } else {
        return makeError(where + ": " + k + " must be a size (bytes, or a string such as \"32GiB\")");
      }
      hw.*(field->size) = bytes;
      break;
    }
    case FieldKind::Count: {
      auto n = value.getAsUINT64();
      if (!n || *n < 1 || *n > 1u << 20)
        return makeError(where + ": " + k + " must be a whole number between 1 and 2^20");
      hw.*(field->count) = static_cast<unsigned>(*n);
      break;
    }
    case FieldKind::Flag: {
      auto b = value.getAsBoolean();
      if (!b)
        return makeError(where + ": " + k + " must be true or false");
      hw.*(field->flag) = *b;
      break;
    }
    case FieldKind::Rate:
    case FieldKind::Seconds: {
      auto n = value.getAsNumber();
      bool seconds = field->kind == FieldKind::Seconds;
      if (!n || !std::isfinite(*n) || (seconds ? *n < 0 : !(*n > 0)))
        return makeError(where + ": " + k +
                         (seconds ? " must be a number of seconds >= 0" : " must be a positive number"));
      hw.*(field->rate) = *n;
      break;
    }
    }
  }
  return llvm::Error::success();
}

/// The seconds on the line through `lo` and `hi` at `x`.
double pointsLine(std::pair<double, double> lo, std::pair<double, double> hi, double x) {
  return lo.second + (x - lo.first) / (hi.first - lo.first) * (hi.second - lo.second);
}

/// The seconds at `x` linear between the measured points around it; `x`
/// lies strictly inside their range.
double betweenPoints(const KernelTimePoints &points, double x) {
  auto hi = std::find_if(points.begin(), points.end(),
                         [&](const auto &p) { return p.first >= x; });
  return pointsLine(*(hi - 1), *hi, x);
}

unsigned share(unsigned ranks, unsigned limit) {
  return std::max(1u, std::min(std::max(ranks, 1u), limit));
}

} // namespace

unsigned Hardware::ranksPerNode(unsigned ranks) const { return share(ranks, gpusPerNode); }
double Hardware::kernelSeconds(double flops, double bytes, bool half, bool product) const {
  if (product && !half && !productTimes.empty())
    return kernelLaunchSeconds + measuredProductSeconds(flops);
  return (product ? gemmLaunchSeconds : kernelLaunchSeconds) +
         std::max(flops / (half ? gpuFlopsHalf : gpuFlopsFp32), bytes / gpuMemBandwidth);
}
double Hardware::measuredProductSeconds(double flops) const {
  const KernelTimePoints &points = productTimes;
  if (flops <= points.front().first)
    return pointsLine({0.0, gemmLaunchSeconds}, points.front(), flops);
  if (flops >= points.back().first)
    return points.back().second + (flops - points.back().first) / gpuFlopsFp32;
  return betweenPoints(points, flops);
}
llvm::Optional<double> Hardware::measuredKernelSeconds(llvm::StringRef op,
                                                      double elements) const {
  // The simulator asks for every compute instruction of every candidate
  // plan: no lookup when nothing was measured (the GPU presets), and no
  // string built for one.
  if (kernelTimes.empty())
    return llvm::None;
  auto it = kernelTimes.find(op);
  if (it == kernelTimes.end() || it->second.empty())
    return llvm::None;
  const KernelTimePoints &points = it->second;
  auto proportional = [&](const std::pair<double, double> &p) {
    return p.second * elements / p.first;
  };
  double seconds = elements <= points.front().first  ? proportional(points.front())
                   : elements >= points.back().first ? proportional(points.back())
                                                     : betweenPoints(points, elements);
  return kernelLaunchSeconds + seconds;
}

double Hardware::h2dPerRank(unsigned ranks) const {
  return hostToDeviceBandwidth / share(ranksPerNode(ranks), gpusPerHostLink);
}
double Hardware::d2hPerRank(unsigned ranks) const {
  return deviceToHostBandwidth / share(ranksPerNode(ranks), gpusPerHostLink);
}
double Hardware::nvmeReadPerRank(unsigned ranks) const {
  return nvmeReadBandwidth / ranksPerNode(ranks);
}
double Hardware::nvmeWritePerRank(unsigned ranks) const {
  return nvmeWriteBandwidth / ranksPerNode(ranks);
}
double Hardware::cpuMemBandwidthPerRank(unsigned ranks) const {
  return cpuMemBandwidth / ranksPerNode(ranks);
}
double Hardware::cpuAdamPerRank(unsigned ranks) const {
  return cpuAdamParamsPerSecond / ranksPerNode(ranks);
}

std::vector<std::string> hardwarePresetNames() {
  std::vector<std::string> names = {"cpu"};
  for (const Preset &p : kPresets)
    names.push_back(p.name);
  return names;
}

llvm::Expected<Hardware> loadHardware(llvm::StringRef presetOrFile) {
  Hardware hw = thisMachine();
  if (presetOrFile == "cpu")
    return hw;
  for (const Preset &p : kPresets)
    if (presetOrFile == p.name) {
      std::string where = ("hw/" + presetOrFile + ".json").str();
      if (auto err = parseDescription(p.json, where, hw))
        return err;
      return hw;
    }
  if (!presetOrFile.endswith(".json")) {
    std::string names;
    for (const std::string &n : hardwarePresetNames())
      names += (names.empty() ? "" : ", ") + n;
    return makeError("unknown hardware '" + presetOrFile + "' (presets: " + names +
                     "; or a .json file)");
  }
  auto buf = llvm::MemoryBuffer::getFile(presetOrFile);
  if (!buf)
    return makeError(presetOrFile + ": cannot open: " + buf.getError().message());
  hw.name = presetOrFile.str();
  if (auto err = parseDescription((*buf)->getBuffer(), presetOrFile, hw))
    return err;
  return hw;
}

llvm::Expected<Hardware> parseHardwareJson(llvm::StringRef text, llvm::StringRef where) {
  Hardware hw = thisMachine();
  if (auto err = parseDescription(text, where, hw))
    return err;
  return hw;
}

std::string hardwareToJson(const Hardware &hw) {
  llvm::json::Object o{{"name", hw.name}};
  for (const Field &f : fields()) {
    switch (f.kind) {
    case FieldKind::Size:
      o[f.key] = static_cast<int64_t>(hw.*(f.size));
      break;
    case FieldKind::Count:
      o[f.key] = static_cast<int64_t>(hw.*(f.count));
      break;
    case FieldKind::Rate:
    case FieldKind::Seconds:
      o[f.key] = hw.*(f.rate);
      break;
    case FieldKind::Flag:
      o[f.key] = hw.*(f.flag);
      break;
    }
  }
  if (!hw.kernelTimes.empty()) {
    llvm::json::Object ops;
    for (const auto &[op, points] : hw.kernelTimes)
      ops[op] = timePointsJson(points);
    o["kernel_seconds"] = std::move(ops);
  }
  if (!hw.productTimes.empty())
    o["product_seconds"] = timePointsJson(hw.productTimes);
  return llvm::formatv("{0:2}", llvm::json::Value(std::move(o))).str();
}

} // namespace zinc
