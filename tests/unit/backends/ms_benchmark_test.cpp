// benchmark's accuracy rule against hand-computed numbers, its data-file format and its flags.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "kiln/backends/ms_benchmark.h"

using namespace kiln;

TEST(BenchmarkAccuracy, MeanBiasIsOverFailingElementsOnly) {
  // e=1 exact (ignored); e=2 → 2.2: relative 0.1; e=0 → 0.5: near-zero expected adds the absolute
  // 0.5; e=4 exact. Mean over the two failing elements: (0.1 + 0.5) / 2 = 0.3.
  auto a = compareBenchmarkTensor({1, 2, 0, 4}, {1, 2.2f, 0.5f, 4});
  EXPECT_NEAR(a.meanError, 0.3, 1e-6);
  EXPECT_FALSE(a.nonFinite);

  // One element off by 100%: the mean over failing elements is 1.0, not 1/4.
  EXPECT_NEAR(compareBenchmarkTensor({1, 1, 1, 1}, {1, 1, 1, 2}).meanError, 1.0, 1e-9);
}

TEST(BenchmarkAccuracy, ToleranceAndNearZeroRules) {
  // |diff| = 5e-4 ≤ 1e-8 + 1e-5·100 = 1.00001e-3: within tolerance.
  EXPECT_EQ(compareBenchmarkTensor({100}, {100.0005f}).meanError, 0.0);
  // |diff| = 2e-3 > tolerance: relative 2e-5 (float rounding of 100.002 kept in the bound).
  EXPECT_NEAR(compareBenchmarkTensor({100}, {100.002f}).meanError, 2e-5, 1e-7);
  // Near-zero expected, |diff| 5e-6: above the 1e-8 tolerance but not above 1e-5, so not added.
  EXPECT_EQ(compareBenchmarkTensor({0}, {5e-6f}).meanError, 0.0);
  // Near-zero expected, |diff| 3e-5: the absolute error is added.
  EXPECT_NEAR(compareBenchmarkTensor({0}, {3e-5f}).meanError, 3e-5, 1e-9);
  // Negative expected values use |expected|: |-2 - (-3)| / 2 = 0.5.
  EXPECT_NEAR(compareBenchmarkTensor({-2}, {-3}).meanError, 0.5, 1e-9);
}

TEST(BenchmarkAccuracy, Cosine) {
  EXPECT_NEAR(compareBenchmarkTensor({1, 2}, {2, 4}).cosine, 1.0, 1e-9);
  EXPECT_NEAR(compareBenchmarkTensor({1, 0}, {0, 1}).cosine, 0.0, 1e-9);
  // (1·1 + 1·(-1) + 1·1) / (√3 · √3) = 1/3.
  EXPECT_NEAR(compareBenchmarkTensor({1, 1, 1}, {1, -1, 1}).cosine, 1.0 / 3, 1e-9);
  EXPECT_EQ(compareBenchmarkTensor({0, 0}, {0, 0}).cosine, 1.0);
  EXPECT_EQ(compareBenchmarkTensor({0, 0}, {1, 0}).cosine, 0.0);
}

TEST(BenchmarkAccuracy, NonFiniteOutputFails) {
  EXPECT_TRUE(
      compareBenchmarkTensor({1, 2}, {1, std::numeric_limits<float>::quiet_NaN()}).nonFinite);
  EXPECT_TRUE(compareBenchmarkTensor({1}, {std::numeric_limits<float>::infinity()}).nonFinite);
}

TEST(BenchmarkData, ParsesNameDimsAndValues) {
  auto data =
      parseBenchmarkData("out0 2 1 3\n0.5 -1 2e-3\n\nout1 1 2\n7 8\nout0 1 1\n9\n", "expected.out");
  ASSERT_TRUE(data) << data.status().toString();
  ASSERT_EQ(data->size(), 2u); // the second out0 is ignored
  EXPECT_EQ((*data)[0].name, "out0");
  EXPECT_EQ((*data)[0].dims, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ((*data)[0].values, (std::vector<float>{0.5f, -1.0f, 2e-3f}));
  EXPECT_EQ((*data)[1].name, "out1");
  EXPECT_EQ((*data)[1].values, (std::vector<float>{7, 8}));
}

TEST(BenchmarkData, BadFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"out0 2 1 3\n0.5 -1\n", "expected.out:2: tensor 'out0' [1,3] needs 3 values but the line "
                               "has 2"},
      {"out0 2 1\n0.5\n", "expected.out:1: tensor 'out0' says 2 dims but lists 1"},
      {"out0 x 1\n0.5\n", "expected.out:1: 'out0 x 1' is not"},
      {"out0 1 2\n0.5 abc\n", "'abc' in the values of 'out0' is not a number"},
      {"out0 1 2\n", "has no line of values"},
      {"\n\n", "holds no tensors"},
  };
  for (const Case& c : cases) {
    auto data = parseBenchmarkData(c.text, "expected.out");
    ASSERT_FALSE(data) << c.text;
    EXPECT_EQ(data.status().code(), ErrorCode::BenchmarkDataInvalid);
    EXPECT_NE(data.status().message().find(c.needle), std::string::npos)
        << data.status().message() << "\nexpected: " << c.needle;
  }
}

TEST(BenchmarkFlags, DefaultsAndValues) {
  bool help = false;
  auto options = parseBenchmarkArgs({"--modelFile=m.ms"}, help);
  ASSERT_TRUE(options) << options.status().toString();
  EXPECT_EQ(options->loopCount, 10);
  EXPECT_EQ(options->warmUpLoopCount, 3);
  EXPECT_EQ(options->numThreads, 2);
  EXPECT_EQ(options->accuracyThreshold, 0.5);
  EXPECT_EQ(options->cosineDistanceThreshold, -1.1);

  options = parseBenchmarkArgs({"--modelFile=m.ms", "--inDataFile=a.bin,b.bin c.bin",
                                "--loopCount=2", "--accuracyThreshold=1.5", "--cpuBindMode=0",
                                "--enableFp16=false", "--cosineDistanceThreshold=0.99"},
                               help);
  ASSERT_TRUE(options) << options.status().toString();
  EXPECT_EQ(options->inDataFiles, (std::vector<std::string>{"a.bin", "b.bin", "c.bin"}));
  EXPECT_EQ(options->loopCount, 2);
  EXPECT_EQ(options->accuracyThreshold, 1.5);
  EXPECT_EQ(options->cosineDistanceThreshold, 0.99);

  EXPECT_TRUE(parseBenchmarkArgs({"--help"}, help));
  EXPECT_TRUE(help);
}

TEST(BenchmarkFlags, BadFlagsAreCoded) {
  const std::vector<std::vector<std::string>> cases = {
      {"--modelFile=m.ms", "--loopCount=0"},   {"--modelFile=m.ms", "--loopCount=ten"},
      {"--modelFile=m.ms", "--bogus=1"},       {"--modelFile", "m.ms"},
      {"--modelFile=m.ms", "--numThreads=0"},  {"--modelFile=m.ms", "--device=GPU"},
      {"--modelFile=a", "--modelFile=b"},      {"--loopCount=1"},
      {"--modelFile=m.ms", "--enableFp16=on"},
  };
  for (const auto& args : cases) {
    bool help = false;
    auto options = parseBenchmarkArgs(args, help);
    ASSERT_FALSE(options) << args.back();
    EXPECT_EQ(options.status().code(), ErrorCode::BadFlag) << args.back();
    EXPECT_FALSE(options.status().hint().empty());
  }
}
