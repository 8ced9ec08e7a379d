// The registry of target backends; backends add themselves from static initializers.
#include "kiln/backends/target.h"

#include <map>

namespace kiln {
namespace {

std::map<std::string, TargetHooks>& registry() {
  static std::map<std::string, TargetHooks> targets;
  return targets;
}

} // namespace

bool registerTarget(TargetHooks hooks) {
  std::string name = hooks.name;
  registry()[name] = std::move(hooks);
  return true;
}

const TargetHooks* findTarget(const std::string& nameAndVariant) {
  std::string name = nameAndVariant.substr(0, nameAndVariant.find(':'));
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

const TargetHooks* findTargetForExtension(const std::string& extension) {
  for (const auto& [name, hooks] : registry())
    for (const std::string& ext : hooks.extensions)
      if (ext == extension) return &hooks;
  return nullptr;
}

std::vector<std::string> targetNames() {
  std::vector<std::string> names;
  for (const auto& [name, hooks] : registry())
    names.push_back(name);
  return names;
}

} // namespace kiln
