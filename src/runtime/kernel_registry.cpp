// The (domain, op type) → kernel table, filled by KILN_REGISTER_KERNEL in each kernel file.
#include <map>
#include <mutex>

#include "kiln/runtime/executor.h"
#include "kiln/runtime/kernel.h"
#include "kiln/support/display.h"

namespace kiln::rt {
namespace {

struct Registered {
  KernelFn fn = nullptr;
  const char* file = "";
};

std::map<std::pair<std::string, std::string>, Registered>& table() {
  static std::map<std::pair<std::string, std::string>, Registered> kernels;
  return kernels;
}

std::string canonicalDomain(const std::string& domain) { return domain == "ai.onnx" ? "" : domain; }

} // namespace

bool registerKernel(const std::string& domain, const std::string& opType, KernelFn fn,
                    const char* file) {
  table()[{canonicalDomain(domain), opType}] = {fn, file};
  return true;
}

KernelFn findKernel(const std::string& domain, const std::string& opType) {
  auto it = table().find({canonicalDomain(domain), opType});
  return it == table().end() ? nullptr : it->second.fn;
}

std::string kernelFile(const std::string& domain, const std::string& opType) {
  auto it = table().find({canonicalDomain(domain), opType});
  return it == table().end() ? std::string() : std::string(it->second.file);
}

std::vector<std::string> registeredOps() {
  std::vector<std::string> out;
  for (const auto& [key, fn] : table())
    out.push_back(key.first.empty() ? key.second : key.first + "::" + key.second);
  return out;
}

int KernelContext::threads() const { return executor_.options().threads; }

bool KernelContext::inputIsConstant(size_t i) const {
  return i < node_.inputs().size() && executor_.isConstantValue(node_.input(i));
}

int64_t KernelContext::attrInt(const std::string& name, int64_t fallback) const {
  const Attribute* a = node_.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

float KernelContext::attrFloat(const std::string& name, float fallback) const {
  const Attribute* a = node_.attribute(name);
  return a && a->kind() == AttrKind::Float ? a->asFloat() : fallback;
}

std::string KernelContext::nodeLabel() const {
  const std::string opType = displayName(node_.opType());
  if (!node_.name().empty())
    return fmt::format("node '{}' ({})", displayName(node_.name()), opType);
  for (const Value* out : node_.outputs())
    if (out && !out->name().empty())
      return fmt::format("node producing '{}' ({})", displayName(out->name()), opType);
  return fmt::format("unnamed node ({})", opType);
}

std::string KernelContext::attrString(const std::string& name, const std::string& fallback) const {
  const Attribute* a = node_.attribute(name);
  return a && a->kind() == AttrKind::String ? a->asString() : fallback;
}

std::vector<int64_t> KernelContext::attrInts(const std::string& name,
                                             std::vector<int64_t> fallback) const {
  const Attribute* a = node_.attribute(name);
  return a && a->kind() == AttrKind::Ints ? a->asInts() : fallback;
}

std::vector<float> KernelContext::attrFloats(const std::string& name,
                                             std::vector<float> fallback) const {
  const Attribute* a = node_.attribute(name);
  return a && a->kind() == AttrKind::Floats ? a->asFloats() : fallback;
}

Expected<std::vector<RtValue>> KernelContext::runSubgraph(const Graph& graph,
                                                          const std::vector<RtValue>& inputs) {
  return executor_.runGraph(graph, inputs, &scope_);
}

} // namespace kiln::rt
