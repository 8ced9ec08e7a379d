// The planned arena of the executor (RunArena): offsets planned from the first run's trace,
// buffers of later runs at those offsets, the pool when a run leaves the trace.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/ir/graph.h"
#include "run_model.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/arena.h"
#include "kiln/runtime/memory.h"
#include "kiln/runtime/tensor_util.h"

using namespace kiln;

namespace {

TEST(RunArena, BuffersOfDisjointLifetimesShareOffsets) {
  rt::BufferPool pool;
  rt::RunArena arena;
  const size_t cls = rt::BufferPool::sizeClass(1000);
  uint8_t* pa[2] = {};
  uint8_t* pc[2] = {};
  for (int run = 0; run < 2; ++run) {
    arena.beginRun();
    uint8_t *a = nullptr, *b = nullptr, *c = nullptr, *out = nullptr;
    auto ha = arena.allocate(1000, &a, pool);
    auto hb = arena.allocate(1000, &b, pool);
    ASSERT_TRUE(ha && hb);
    std::memset(a, 1, 1000);
    std::memset(b, 2, 1000);
    ha.reset(); // a's last use
    auto hc = arena.allocate(1000, &c, pool);
    auto hout = arena.allocate(500, &out, pool); // kept past the run, like a graph output
    std::memset(c, 3, 1000);
    EXPECT_EQ(b[999], 2); // c does not overlap b, which is still in use
    hb.reset();
    hc.reset();
    arena.endRun();
    pa[run] = a;
    pc[run] = c;
    EXPECT_NE(out, nullptr);
  }
  const rt::RunArena::Stats stats = arena.stats();
  EXPECT_EQ(stats.arenaBytes, 2 * cls); // a and c share one place, b has the other
  EXPECT_EQ(stats.recordedPeak, 2500u);
  EXPECT_EQ(stats.planned, 3u);
  EXPECT_EQ(stats.served, 3u);
  EXPECT_EQ(pa[1], pc[1]);
  EXPECT_EQ(pool.stats().requests, 1u); // the second run's kept buffer
  EXPECT_EQ(stats.divergedRuns, 0u);
}

TEST(RunArena, ARunThatLeavesTheTraceFallsBackToThePool) {
  rt::BufferPool pool;
  rt::RunArena arena;
  arena.beginRun();
  uint8_t* p = nullptr;
  arena.allocate(4096, &p, pool).reset();
  arena.allocate(4096, &p, pool).reset();
  arena.endRun();
  arena.beginRun();
  auto first = arena.allocate(4096, &p, pool);
  uint8_t* q = nullptr;
  auto second = arena.allocate(4096, &q, pool); // the trace released the first one before this
  EXPECT_EQ(second, nullptr);                   // not served: the caller takes it from the pool
  first.reset();
  arena.endRun();
  EXPECT_EQ(arena.stats().divergedRuns, 1u);
  // A later run that follows the trace is served again.
  arena.beginRun();
  arena.allocate(4096, &p, pool).reset();
  auto again = arena.allocate(4096, &q, pool);
  EXPECT_NE(again, nullptr);
  EXPECT_EQ(p, q);
  again.reset();
  arena.endRun();
  EXPECT_EQ(arena.stats().divergedRuns, 1u);
}

TEST(RunArena, SkippedWhileABufferOfItIsStillHeld) {
  rt::BufferPool pool;
  rt::RunArena arena;
  uint8_t* p = nullptr;
  arena.beginRun();
  arena.allocate(4096, &p, pool).reset();
  arena.endRun();
  arena.beginRun();
  auto held = arena.allocate(4096, &p, pool); // released by the trace, but held past the run here
  ASSERT_NE(held, nullptr);
  arena.endRun();
  arena.beginRun();
  uint8_t* q = nullptr;
  EXPECT_EQ(arena.allocate(4096, &q, pool), nullptr);
  arena.endRun();
  held.reset();
}

// x -> Relu -> Add(w) -> Mul(w) -> Neg -> y
Model chain(int64_t n) {
  Model model;
  Value* x = kiln::testing::startModelWithInput(model);
  Graph& g = *model.graph;
  std::vector<float> wv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    wv[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  Value* w = g.addInitializer("w", rt::makeTensor<float>(DType::Float32, {n}, wv));
  Node* relu = g.appendNode("Relu", {x}, {"r"});
  Node* add = g.appendNode("Add", {relu->output(0), w}, {"a"});
  Node* mul = g.appendNode("Mul", {add->output(0), w}, {"m"});
  Node* neg = g.appendNode("Neg", {mul->output(0)}, {"y"});
  g.addOutput(neg->output(0));
  return model;
}

std::map<std::string, rt::RtValue> input(int64_t n, float shift) {
  std::vector<float> xv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    xv[static_cast<size_t>(i)] = static_cast<float>(i % 13) - 6.0f + shift;
  return {{"x", rt::RtValue::ofTensor(rt::makeTensor<float>(DType::Float32, {n}, xv))}};
}

TEST(ExecutorArena, LaterRunsUseThePlannedArenaAndMatchThePool) {
  const int64_t n = 1 << 15;
  Model model = chain(n);
  rt::ExecutorOptions poolOnly;
  poolOnly.plannedArena = false;
  rt::Executor planned(model), pooled(model, poolOnly);
  for (int run = 0; run < 4; ++run) {
    auto feeds = input(n, 0.5f * static_cast<float>(run));
    auto a = planned.run(feeds);
    auto b = pooled.run(feeds);
    ASSERT_TRUE(a.hasValue()) << a.status().toString();
    ASSERT_TRUE(b.hasValue()) << b.status().toString();
    EXPECT_TRUE(a->outputs[0].tensor.sameContents(b->outputs[0].tensor)) << run;
  }
  const auto stats = planned.memoryStats();
  // Relu, Add and Mul outputs (Neg's is the graph output): at most two in use at once.
  EXPECT_EQ(stats.arenaBytes, 2 * rt::BufferPool::sizeClass(n * 4));
  EXPECT_EQ(stats.arenaServed, 3u * 3);
  EXPECT_EQ(stats.divergedRuns, 0u);
  EXPECT_EQ(pooled.memoryStats().arenaBytes, 0u);
}

TEST(ExecutorArena, OtherShapesLeaveThePlanAndStayCorrect) {
  Model model = chain(64);
  // The graph's shapes are not fixed by the model: feed two sizes with a broadcastable w.
  Graph& g = *model.graph;
  Value* w = g.findLocalValue("w");
  w->setInitializer(rt::makeTensor<float>(DType::Float32, {1}, {0.75f}));
  rt::ExecutorOptions poolOnly;
  poolOnly.plannedArena = false;
  rt::Executor planned(model), pooled(model, poolOnly);
  for (int64_t n : {4096, 1000, 4096, 8192}) {
    auto feeds = input(n, 0.25f);
    auto a = planned.run(feeds);
    auto b = pooled.run(feeds);
    ASSERT_TRUE(a.hasValue()) << a.status().toString();
    ASSERT_TRUE(b.hasValue()) << b.status().toString();
    EXPECT_TRUE(a->outputs[0].tensor.sameContents(b->outputs[0].tensor)) << n;
  }
  EXPECT_EQ(planned.memoryStats().divergedRuns, 2u);
  EXPECT_EQ(planned.memoryStats().arenaServed, 3u);
}

} // namespace
