// kiln tensor's library: .npy headers read and written, seeded random tensors that stay inside
// their range, and benchmark data text that benchmark's own parser reads back exactly.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "kiln/backends/ms_benchmark.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/tensor_files.h"

namespace kiln {
namespace {

std::string header(const std::string& dict, int version = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const size_t length = dict.size() + 1;
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(length >> 8);
  if (version == 2) out += std::string(2, '\0');
  return out + dict + "\n";
}

TEST(Npy, EveryTypeRoundTrips) {
  for (DType type : tensorFileDTypes()) {
    Tensor t = randomTensor(type, {2, 3}, 5, *tensorRandomRange(type, ""));
    std::string bytes = npyBytes(t);
    EXPECT_EQ(bytes.size() % 64, t.byteSize() % 64) << "data starts on a 64-byte boundary";
    auto back = parseNpy(bytes, "t.npy");
    ASSERT_TRUE(back) << back.status().toString();
    EXPECT_EQ(back->dtype(), type);
    EXPECT_EQ(back->dims(), t.dims());
    EXPECT_TRUE(back->sameContents(t)) << tensorFileDTypeName(type);
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  // Double quotes, Python 2's 3L, no trailing comma, and spaces where numpy puts none.
  std::string bytes =
      header("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": ( 2L , 1 )}") +
      std::string("\x01\x00\x00\x00\xff\xff\xff\xff", 8);
  auto t = parseNpy(bytes, "a.npy");
  ASSERT_TRUE(t) << t.status().toString();
  EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(t->copyValues<int32_t>(), (std::vector<int32_t>{1, -1}));
  auto v2 = parseNpy(header("{'descr': '|u1', 'fortran_order': False, 'shape': ()}", 2) + "\x07",
                     "b.npy");
  ASSERT_TRUE(v2) << v2.status().toString();
  EXPECT_TRUE(v2->dims().empty());
}

TEST(Npy, RefusesWhatItCannotRead) {
  const std::string one = std::string("\x00\x00\x80\x3f", 4);
  struct Case {
    std::string bytes;
    std::string message;
  } cases[] = {
      {header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") + one,
       "a.npy: .npy array is in Fortran order (fortran_order: True)"},
      {header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + one,
       "a.npy: .npy element type '>f4' is big-endian"},
      {header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") + one,
       "a.npy: .npy element type '<c8' is not supported"},
      {header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }") + one,
       "a.npy: .npy header: 'descr' is not a type string (a structured array)"},
      {header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }") + one,
       "a.npy: .npy header: key 'descr' is given twice"},
      {header("{'descr': '<f4', 'shape': (1,), }") + one,
       "a.npy: .npy header: no 'fortran_order' key"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }") + one,
       "a.npy: .npy header: dim 0 of 'shape' is not a non-negative integer"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
       "a.npy: .npy header: dim 0 of 'shape' does not fit in 64 bits"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }") + one,
       "a.npy: .npy data is 4 bytes but shape (2) of float32 needs 8"},
      {header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x") + one,
       "a.npy: .npy header: text after the closing '}' (byte 58)"},
      {std::string("\x93NUMPY\x01", 7), "a.npy: .npy file ends inside its version"},
  };
  for (const Case& c : cases) {
    auto t = parseNpy(c.bytes, "a.npy");
    ASSERT_FALSE(t) << c.message;
    EXPECT_EQ(t.status().code(), ErrorCode::ConformanceDataBad);
    EXPECT_EQ(t.status().message(), c.message);
  }
}

TEST(RandomTensor, SameSeedSameValuesInsideTheRange) {
  // A narrow float16 range makes rounding to the nearest half land on HIGH; it must not.
  RandomRange narrow{0.0, 0.001};
  Tensor h = randomTensor(DType::Float16, {4096}, 3, narrow);
  for (uint64_t i = 0; i < h.elementCount(); ++i) {
    const double v = rt::elementAsDouble(h, i);
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 0.001);
  }
  Tensor a = randomTensor(DType::Int8, {4096}, 9, *tensorRandomRange(DType::Int8, ""));
  EXPECT_TRUE(a.sameContents(randomTensor(DType::Int8, {4096}, 9, {-128, 128})));
  auto values = a.copyValues<int8_t>();
  EXPECT_EQ(*std::min_element(values.begin(), values.end()), -128);
  EXPECT_EQ(*std::max_element(values.begin(), values.end()), 127);
  Tensor f = randomTensor(DType::Float32, {2}, 7, {-1, 1});
  // splitmix64's first two draws from seed 7, pinned: the generator must not change.
  auto drawn = f.copyValues<float>();
  EXPECT_EQ(std::bit_cast<uint32_t>(drawn[0]), 0xbe61a0f8u); // -0.220341
  EXPECT_EQ(std::bit_cast<uint32_t>(drawn[1]), 0xbf776788u); // -0.966424
  EXPECT_FALSE(f.sameContents(randomTensor(DType::Float32, {2}, 8, {-1, 1})));
}

TEST(RandomTensor, RangesTheTypeCannotHoldAreFlagErrors) {
  for (auto [type, text] : std::vector<std::pair<DType, std::string>>{{DType::Int8, "0,129"},
                                                                      {DType::UInt8, "-1,5"},
                                                                      {DType::Int32, "0.5,3"},
                                                                      {DType::Float16, "0,70000"},
                                                                      {DType::Float32, "2,1"},
                                                                      {DType::Float32, "1"},
                                                                      {DType::Int64, "0,1e17"}}) {
    auto range = tensorRandomRange(type, text);
    ASSERT_FALSE(range) << text;
    EXPECT_EQ(range.status().code(), ErrorCode::BadFlag);
  }
  EXPECT_TRUE(tensorRandomRange(DType::Int8, "-128,128"));
}

TEST(BenchmarkData, ReadsBackAsTheSameFloats) {
  const std::vector<float> values = {0.1f,     -1e-45f, std::numeric_limits<float>::max(),
                                     1.0f / 3, -0.0f,   123456.789f};
  Tensor t = Tensor::fromValues(DType::Float32, {2, 3}, values);
  Tensor scalar = Tensor::fromValues(DType::Int64, {}, std::vector<int64_t>{42});
  auto text = benchmarkDataText({{"y", t}, {"count", scalar}}, {"y.pb", "count.pb"});
  ASSERT_TRUE(text) << text.status().toString();
  auto parsed = parseBenchmarkData(*text, "expected.txt");
  ASSERT_TRUE(parsed) << parsed.status().toString();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].name, "y");
  EXPECT_EQ((*parsed)[0].dims, (std::vector<int64_t>{2, 3}));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>((*parsed)[0].values[i]), std::bit_cast<uint32_t>(values[i]));
  EXPECT_TRUE((*parsed)[1].dims.empty());
  EXPECT_EQ((*parsed)[1].values, (std::vector<float>{42}));
  auto spaced = benchmarkDataText({{"a b", t}}, {"ab.pb"});
  ASSERT_FALSE(spaced);
  EXPECT_EQ(spaced.status().code(), ErrorCode::ConformanceDataBad);
}

} // namespace
} // namespace kiln
