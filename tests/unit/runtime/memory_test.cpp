// Executor memory: the buffer pool and its size classes, uninitialised vs zeroed allocation,
// buffers reused across runs, fp16 weights widened once, kernels that rely on zeroed outputs.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/memory.h"
#include "kiln/runtime/tensor_util.h"
#include "run_model.h"
#include "runtime/kernels/conv_dnnl.h"

using namespace kiln;

namespace {

TEST(BufferPool, SizeClassesCoverTheRequestWithAtMostAnEighthMore) {
  size_t previous = 0;
  for (size_t bytes = 1; bytes < (size_t{1} << 26); bytes = bytes * 3 / 2 + 1) {
    const size_t c = rt::BufferPool::sizeClass(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_EQ(c % 64, 0u) << bytes;
    EXPECT_LE(c, std::max<size_t>(64, bytes + bytes / 8 + 64)) << bytes;
    EXPECT_GE(c, previous);
    previous = c;
  }
  EXPECT_EQ(rt::BufferPool::sizeClass(4096), 4096u);
  EXPECT_EQ(rt::BufferPool::sizeClass(4097), 4608u);
}

TEST(BufferPool, ReleasedBlocksAreHandedOutAgain) {
  rt::BufferPool pool;
  uint8_t* first = nullptr;
  uint8_t* again = nullptr;
  {
    auto block = pool.allocate(100000, &first);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  auto block = pool.allocate(99000, &again); // same size class
  EXPECT_EQ(again, first);
  const rt::BufferPool::Stats stats = pool.stats();
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.reused, 1u);
  EXPECT_EQ(stats.heldBytes, rt::BufferPool::sizeClass(100000));
}

TEST(BufferPool, BlocksOutliveAClosedPool) {
  std::shared_ptr<void> kept;
  {
    rt::BufferPool pool;
    uint8_t* data = nullptr;
    kept = pool.allocate(1 << 20, &data);
    std::memset(data, 1, 1 << 20);
  } // closed with the block still in use; it frees itself below
  kept.reset();
}

TEST(Allocation, ZeroedMeansZeroEvenForAReusedDirtyBlock) {
  rt::ExecutorMemory memory;
  rt::MemoryScope scope(&memory);
  {
    rt::OutTensor dirty(DType::Float32, {1000});
    std::memset(dirty.bytes(), 0xab, dirty.byteSize());
  }
  rt::OutTensor clean(DType::Float32, {1000}, rt::Init::Zeroed);
  for (uint64_t i = 0; i < clean.elementCount(); ++i)
    ASSERT_EQ(clean.data<float>()[i], 0.0f);
  EXPECT_EQ(memory.pool.stats().reused, 1u);
}

TEST(Allocation, PoisonFillsUninitialisedBytes) {
  rt::setPoisonUninitialised(true);
  rt::OutTensor t(DType::UInt8, {16});
  rt::setPoisonUninitialised(false);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(t.bytes()[i], 0xff);
}

// x -> Relu -> Add(w) -> Mul(w) -> y, plus an unread Dropout mask.
Model chainModel(DType dtype, int64_t n) {
  Model model;
  Value* x = kiln::testing::startModelWithInput(model);
  Graph& g = *model.graph;
  std::vector<uint16_t> halves(static_cast<size_t>(n));
  std::vector<float> floats(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    floats[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    halves[static_cast<size_t>(i)] = rt::floatToHalf(floats[static_cast<size_t>(i)]);
  }
  Value* w = dtype == DType::Float16
                 ? g.addInitializer("w", rt::makeTensor<uint16_t>(dtype, {n}, halves))
                 : g.addInitializer("w", rt::makeTensor<float>(dtype, {n}, floats));
  Node* relu = g.appendNode("Relu", {x}, {"r"});
  Node* drop = g.appendNode("Dropout", {relu->output(0)}, {"d", "mask"});
  Node* add = g.appendNode("Add", {drop->output(0), w}, {"a"});
  Node* mul = g.appendNode("Mul", {add->output(0), w}, {"y"});
  g.addOutput(mul->output(0));
  return model;
}

TEST(ExecutorMemory, BuffersAreReusedAcrossRunsAndOutputsRepeat) {
  const int64_t n = 1 << 16;
  Model model = chainModel(DType::Float32, n);
  std::vector<float> xv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    xv[static_cast<size_t>(i)] = static_cast<float>(i % 13) - 6.0f;
  std::map<std::string, rt::RtValue> feeds = {
      {"x", rt::RtValue::ofTensor(rt::makeTensor<float>(DType::Float32, {n}, xv))}};
  rt::Executor exec(model);
  Tensor y;
  {
    auto first = exec.run(feeds);
    ASSERT_TRUE(first.hasValue()) << first.status().toString();
    y = first->outputs[0].tensor;
  }
  ASSERT_TRUE(exec.run(feeds).hasValue()); // the first output is still held: one more block
  const auto afterFirst = exec.memoryStats();
  for (int run = 0; run < 3; ++run) {
    auto again = exec.run(feeds);
    ASSERT_TRUE(again.hasValue());
    EXPECT_TRUE(again->outputs[0].tensor.sameContents(y));
  }
  const auto afterMore = exec.memoryStats();
  // Every later run is served by the buffers of the first two: nothing new is allocated.
  EXPECT_EQ(afterMore.pooledBytes, afterFirst.pooledBytes);
  EXPECT_GT(afterMore.reused, afterFirst.reused);
  // Relu's output (aliased by Dropout's), Add's, the held output and the mask at most.
  EXPECT_LE(afterFirst.peakLiveBytes, 4 * rt::BufferPool::sizeClass(n * 4));
  for (int64_t i = 0; i < n; ++i) {
    const float w = 0.25f * static_cast<float>(i % 7) - 0.5f;
    ASSERT_EQ(reinterpret_cast<const float*>(y.data())[i],
              (std::max(xv[static_cast<size_t>(i)], 0.0f) + w) * w);
  }
}

TEST(ExecutorMemory, Fp16WeightsAreWidenedOnceAndFp16ElementwiseMatchesFloatRounding) {
  const int64_t n = 4096;
  Model model = chainModel(DType::Float16, n);
  std::vector<uint16_t> xv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    xv[static_cast<size_t>(i)] = rt::floatToHalf(0.1f * static_cast<float>(i % 31) - 1.3f);
  std::map<std::string, rt::RtValue> feeds = {
      {"x", rt::RtValue::ofTensor(rt::makeTensor<uint16_t>(DType::Float16, {n}, xv))}};
  rt::Executor exec(model);
  auto run = exec.run(feeds);
  ASSERT_TRUE(run.hasValue()) << run.status().toString();
  const uint16_t* y = reinterpret_cast<const uint16_t*>(run->outputs[0].tensor.data());
  for (int64_t i = 0; i < n; ++i) {
    const float x = rt::halfToFloat(xv[static_cast<size_t>(i)]);
    const float w = rt::halfToFloat(rt::floatToHalf(0.25f * static_cast<float>(i % 7) - 0.5f));
    const float r = std::max(x, 0.0f);
    const float a = rt::halfToFloat(rt::floatToHalf(r + w));
    ASSERT_EQ(y[i], rt::floatToHalf(a * w)) << i;
  }
  // Add and Mul read w widened (through the cache) at most once for the executor's life.
  const size_t widened = exec.memoryStats().widenedWeightBytes;
  EXPECT_LE(widened, static_cast<size_t>(n) * 4);
  ASSERT_TRUE(exec.run(feeds).hasValue());
  EXPECT_EQ(exec.memoryStats().widenedWeightBytes, widened);
}

// An fp16 Conv's constant weights are made float32 once for the executor's life, not on every
// call: a 1x1 (GEMM) convolution reads the executor's widened copy; a 3x3 one that oneDNN runs
// keeps them only in oneDNN's packed layout (no widened copy beside it). Both give the numbers of
// an executor-free evaluation, which converts the weights on the call.
TEST(ExecutorMemory, Fp16ConvWeightsAreWidenedOnce) {
  for (const int64_t k : {int64_t{1}, int64_t{3}}) {
    Model model;
    Value* x = kiln::testing::startModelWithInput(model);
    Graph& g = *model.graph;
    std::vector<uint16_t> wv(static_cast<size_t>(4 * 2 * k * k));
    for (size_t i = 0; i < wv.size(); ++i)
      wv[i] = rt::floatToHalf(0.125f * static_cast<float>(i % 9) - 0.5f);
    Value* w = g.addInitializer("w", rt::makeTensor<uint16_t>(DType::Float16, {4, 2, k, k}, wv));
    Node* conv = g.appendNode("Conv", {x, w}, {"y"});
    const int64_t pad = k / 2;
    conv->setAttribute("pads", Attribute::ofInts({pad, pad, pad, pad}));
    g.addOutput(conv->output(0));
    std::vector<uint16_t> xv(50);
    for (size_t i = 0; i < xv.size(); ++i)
      xv[i] = rt::floatToHalf(0.0625f * static_cast<float>(i % 11));
    std::map<std::string, rt::RtValue> feeds = {
        {"x", rt::RtValue::ofTensor(rt::makeTensor<uint16_t>(DType::Float16, {1, 2, 5, 5}, xv))}};
    rt::Executor exec(model);
    auto first = exec.run(feeds);
    ASSERT_TRUE(first.hasValue()) << first.status().toString();
    const size_t kept = k == 3 && rt::dnnl_conv::available() ? 0 : wv.size() * sizeof(float);
    EXPECT_EQ(exec.memoryStats().widenedWeightBytes, kept) << k;
    auto second = exec.run(feeds);
    ASSERT_TRUE(second.hasValue());
    EXPECT_TRUE(first->outputs[0].tensor.sameContents(second->outputs[0].tensor)) << k;
    EXPECT_EQ(exec.memoryStats().widenedWeightBytes, kept) << k;
    Node& node = *g.nodes().front();
    rt::RtValue xr = feeds["x"];
    rt::RtValue wr = rt::RtValue::ofTensor(w->initializer());
    auto direct = rt::Executor::evaluateNode(node, {&xr, &wr}, 17);
    ASSERT_TRUE(direct.hasValue());
    EXPECT_TRUE((*direct)[0].tensor.sameContents(first->outputs[0].tensor)) << k;
  }
}

// Kernels that leave elements untouched must ask for zeroed outputs: with every uninitialised
// byte poisoned (0xff), their results must still be exact.
TEST(ExecutorMemory, PartialWritersAskForZeroedOutputs) {
  rt::setPoisonUninitialised(true);
  Model model;
  model.opsets = {{"", 17}};
  model.graph = std::make_shared<Graph>("g");
  Graph& g = *model.graph;
  std::vector<float> ones(12, 1.0f);
  Value* x = g.addInitializer("x", rt::makeTensor<float>(DType::Float32, {3, 4}, ones));
  Node* eye = g.appendNode("EyeLike", {x}, {"eye"});
  Node* tri = g.appendNode("Trilu", {x}, {"tri"});
  g.addOutput(eye->output(0));
  g.addOutput(tri->output(0));
  rt::Executor exec(model);
  auto run = exec.run({});
  rt::setPoisonUninitialised(false);
  ASSERT_TRUE(run.hasValue()) << run.status().toString();
  const float* e = reinterpret_cast<const float*>(run->outputs[0].tensor.data());
  const float* t = reinterpret_cast<const float*>(run->outputs[1].tensor.data());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(e[i * 4 + j], i == j ? 1.0f : 0.0f);
      EXPECT_EQ(t[i * 4 + j], j >= i ? 1.0f : 0.0f);
    }
}

} // namespace
