// com.microsoft MatMulNBits and blocked DequantizeLinear (opset 21) in the executor, against direct
// references: packed 2/4/8-bit codes with default, packed uint8 and float zero points, bias, a
// padded last block, several rows of A; the same bits at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "runtime/kernels/thread_pool.h"

using namespace kiln;

namespace {

struct Case {
  int64_t m, k, n, bits, blockSize;
  enum class Zero { Default, Packed, Float } zero;
  bool bias;
};

std::vector<float> runModel(Model& model, int threads) {
  rt::ExecutorOptions options;
  options.threads = threads;
  rt::Executor exec(model, options);
  // These inputs are below the pool's work threshold: split them anyway at 2 threads.
  rt::pool::setSplitAlways(threads > 1);
  auto result = exec.run({});
  rt::pool::setSplitAlways(false);
  EXPECT_TRUE(result.hasValue()) << result.status().toString();
  if (!result.hasValue()) return {};
  return result->outputs.at(0).tensor.copyValues<float>();
}

void check(const Case& c, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int64_t blocks = (c.k + c.blockSize - 1) / c.blockSize, blob = c.blockSize * c.bits / 8;
  const int64_t zpRow = (blocks * c.bits + 7) / 8;
  std::vector<float> a(static_cast<size_t>(c.m * c.k));
  for (float& v : a)
    v = unit(gen);
  std::vector<uint8_t> b(static_cast<size_t>(c.n * blocks * blob));
  for (uint8_t& v : b)
    v = static_cast<uint8_t>(gen());
  std::vector<float> scales(static_cast<size_t>(c.n * blocks));
  for (float& s : scales)
    s = 0.01f + 0.02f * std::fabs(unit(gen));
  std::vector<uint8_t> zpPacked(static_cast<size_t>(c.n * zpRow));
  for (uint8_t& v : zpPacked)
    v = static_cast<uint8_t>(gen());
  std::vector<float> zpFloat(scales.size());
  for (float& z : zpFloat)
    z = static_cast<float>(1 << (c.bits - 1)) + unit(gen);
  std::vector<float> bias(static_cast<size_t>(c.n));
  for (float& v : bias)
    v = unit(gen);

  // Reference: each weight dequantized by the spec's rule, sums in double.
  const uint32_t mask = (1u << c.bits) - 1;
  auto code = [&](const uint8_t* p, int64_t j) {
    const int64_t bit = j * c.bits;
    return static_cast<double>((p[bit / 8] >> (bit % 8)) & mask);
  };
  std::vector<float> expected(static_cast<size_t>(c.m * c.n));
  for (int64_t col = 0; col < c.n; ++col)
    for (int64_t row = 0; row < c.m; ++row) {
      double sum = c.bias ? bias[static_cast<size_t>(col)] : 0.0;
      for (int64_t k = 0; k < c.k; ++k) {
        const int64_t blk = k / c.blockSize, at = col * blocks + blk;
        double zp = static_cast<double>(1 << (c.bits - 1));
        if (c.zero == Case::Zero::Packed) zp = code(zpPacked.data() + col * zpRow, blk);
        if (c.zero == Case::Zero::Float) zp = zpFloat[static_cast<size_t>(at)];
        const double w =
            (code(b.data() + at * blob, k % c.blockSize) - zp) * scales[static_cast<size_t>(at)];
        sum += static_cast<double>(a[static_cast<size_t>(row * c.k + k)]) * w;
      }
      expected[static_cast<size_t>(row * c.n + col)] = static_cast<float>(sum);
    }

  Model model;
  model.opsets = {{"", 17}, {"com.microsoft", 1}};
  model.graph = std::make_shared<Graph>("g");
  Graph& g = *model.graph;
  std::vector<Value*> inputs = {
      g.addInitializer("a", rt::makeTensor<float>(DType::Float32, {1, c.m, c.k}, a)),
      g.addInitializer("b", rt::makeTensor<uint8_t>(DType::UInt8, {c.n, blocks, blob}, b)),
      g.addInitializer("scales", rt::makeTensor<float>(DType::Float32, {c.n * blocks}, scales))};
  if (c.zero == Case::Zero::Packed)
    inputs.push_back(
        g.addInitializer("zp", rt::makeTensor<uint8_t>(DType::UInt8, {c.n * zpRow}, zpPacked)));
  if (c.zero == Case::Zero::Float)
    inputs.push_back(
        g.addInitializer("zp", rt::makeTensor<float>(DType::Float32, {c.n * blocks}, zpFloat)));
  if (c.bias) {
    while (inputs.size() < 5)
      inputs.push_back(nullptr);
    inputs.push_back(g.addInitializer("bias", rt::makeTensor<float>(DType::Float32, {c.n}, bias)));
  }
  Node* node = g.appendNode("MatMulNBits", inputs, {"y"});
  node->setDomain("com.microsoft");
  node->setAttribute("K", Attribute::ofInt(c.k));
  node->setAttribute("N", Attribute::ofInt(c.n));
  node->setAttribute("bits", Attribute::ofInt(c.bits));
  node->setAttribute("block_size", Attribute::ofInt(c.blockSize));
  g.addOutput(node->output(0));
  const std::vector<float> one = runModel(model, 1), two = runModel(model, 2);
  ASSERT_EQ(one.size(), expected.size());
  EXPECT_EQ(one, two) << "the result depends on the thread count";
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(one[i], expected[i], 1e-4 * (1 + std::fabs(expected[i]))) << "element " << i;
}

TEST(MatMulNBits, FourBitDefaultZeroPoint) {
  check({3, 256, 40, 4, 32, Case::Zero::Default, false}, 1);
}

TEST(MatMulNBits, FourBitPackedZeroPointsBiasPaddedBlock) {
  // K = 200: the last of 4 blocks of 64 holds 8 codes and padding; 4 blocks → 2 zp bytes a column.
  check({2, 200, 33, 4, 64, Case::Zero::Packed, true}, 2);
}

TEST(MatMulNBits, TwoAndEightBitsFloatZeroPoints) {
  check({1, 128, 17, 2, 16, Case::Zero::Float, false}, 3);
  check({4, 96, 9, 8, 32, Case::Zero::Packed, true}, 4);
}

TEST(DequantizeLinear, BlockedInt4AndUint4) {
  // int4 x [3, 70] blocked by 32 along axis 1 (3 blocks, the last holding 6), zero points int4.
  std::mt19937 gen(5);
  for (const bool isSigned : {true, false}) {
    for (const int64_t axis : {0, 1}) {
      const std::vector<int64_t> dims = {axis == 0 ? 70 : 3, axis == 0 ? 3 : 70};
      const int64_t count = dims[0] * dims[1], block = 32, blocks = (70 + block - 1) / block;
      std::vector<int64_t> sdims = dims;
      sdims[static_cast<size_t>(axis)] = blocks;
      const int64_t scaleCount = sdims[0] * sdims[1];
      std::vector<uint8_t> codes(static_cast<size_t>((count + 1) / 2)),
          zps(static_cast<size_t>((scaleCount + 1) / 2));
      for (uint8_t& v : codes)
        v = static_cast<uint8_t>(gen());
      for (uint8_t& v : zps)
        v = static_cast<uint8_t>(gen());
      std::vector<float> scales(static_cast<size_t>(scaleCount));
      for (float& s : scales)
        s = 0.5f + static_cast<float>(gen() % 100) / 64.0f;
      const DType dt = isSigned ? DType::Int4 : DType::UInt4;
      Model model;
      model.opsets = {{"", 21}};
      model.graph = std::make_shared<Graph>("g");
      Graph& g = *model.graph;
      Node* node =
          g.appendNode("DequantizeLinear",
                       {g.addInitializer("x", Tensor(dt, dims, Buffer::owned(codes))),
                        g.addInitializer("s", rt::makeTensor<float>(DType::Float32, sdims, scales)),
                        g.addInitializer("z", Tensor(dt, sdims, Buffer::owned(zps)))},
                       {"y"});
      node->setAttribute("axis", Attribute::ofInt(axis));
      node->setAttribute("block_size", Attribute::ofInt(block));
      g.addOutput(node->output(0));
      const std::vector<float> y = runModel(model, 2);
      ASSERT_EQ(y.size(), static_cast<size_t>(count));
      for (int64_t r = 0; r < dims[0]; ++r)
        for (int64_t c = 0; c < dims[1]; ++c) {
          const int64_t i = r * dims[1] + c;
          const int64_t sr = axis == 0 ? r / block : r, sc = axis == 1 ? c / block : c;
          const int64_t si = sr * sdims[1] + sc;
          const double want =
              static_cast<double>(rt::nibbleAt(codes.data(), static_cast<uint64_t>(i), isSigned) -
                                  rt::nibbleAt(zps.data(), static_cast<uint64_t>(si), isSigned)) *
              scales[static_cast<size_t>(si)];
          ASSERT_EQ(y[static_cast<size_t>(i)], static_cast<float>(want))
              << (isSigned ? "int4" : "uint4") << " axis " << axis << " element " << i;
        }
    }
  }
}

} // namespace
