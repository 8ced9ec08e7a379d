// closestSpelling: which typos get a suggestion and which words are too far from any.
#include "kiln/support/suggest.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(ClosestSpelling, TyposCaseAndDashes) {
  const std::vector<std::string> flags = {"input_shape", "input_format", "output", "model"};
  EXPECT_EQ(closestSpelling("input_shap", flags), "input_shape");
  EXPECT_EQ(closestSpelling("inptu_shape", flags), "input_shape");
  EXPECT_EQ(closestSpelling("input-shape", flags), "input_shape");
  EXPECT_EQ(closestSpelling("INPUT_FORMAT", flags), "input_format");
  EXPECT_EQ(closestSpelling("ascend310p3", {"Ascend310P1", "Ascend310P3"}), "Ascend310P3");
}

TEST(ClosestSpelling, FarWordsGetNone) {
  const std::vector<std::string> flags = {"input_shape", "insert_op_conf", "output", "model"};
  EXPECT_EQ(closestSpelling("graph_optimize_mode", flags), "");
  EXPECT_EQ(closestSpelling("insert_batchnorm_mode", flags), "");
  EXPECT_EQ(closestSpelling("x", flags), "");
}

} // namespace
} // namespace kiln
