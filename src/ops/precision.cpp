// The op → FP16 trait table (ops/precision.h).
#include "ops/precision.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace kiln::ops {
namespace {

std::map<std::string, uint8_t>& table() {
  static std::map<std::string, uint8_t> traits;
  return traits;
}

} // namespace

bool registerFp16Traits(const char* op, uint8_t traits) {
  if (!table().emplace(op, traits).second) {
    std::fprintf(stderr, "kiln: internal error: FP16 traits of %s registered twice\n", op);
    std::abort();
  }
  return true;
}

uint8_t fp16Traits(const std::string& op) {
  auto it = table().find(op);
  return it == table().end() ? 0 : it->second;
}

} // namespace kiln::ops
