// norm ops: facts every consumer shares (the executor's Dropout kernel and the .ms Dropout
// lowering).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::ops {

// The uniform [0, 1) draws of training-mode Dropout, one per element in order: MT19937 seeded
// with `seed` (the seed attribute, 0 when absent, so runs are reproducible), each a 53-bit double
// from two 32-bit outputs — the convention of the ONNX reference generator. An element is kept
// where its draw is >= the ratio.
std::vector<double> dropoutDraws(int64_t seed, uint64_t count);

} // namespace kiln::ops
