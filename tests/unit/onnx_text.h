// ONNX text syntax → Model, for unit tests. The text syntax cannot name nodes, so node i is named
// names[i] when given, else "n<i>" (as exporters name them) unless `nameNodes` is false.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "kiln/frontend/onnx.h"

namespace kiln::testing {

inline Model modelFromOnnxText(const std::string& text, bool nameNodes = true,
                               const std::vector<std::string>& names = {}) {
  onnx::ModelProto proto;
  auto status = onnx::OnnxParser::Parse(proto, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  for (int i = 0; i < proto.graph().node_size(); ++i) {
    const size_t k = static_cast<size_t>(i);
    if (k < names.size())
      proto.mutable_graph()->mutable_node(i)->set_name(names[k]);
    else if (nameNodes)
      proto.mutable_graph()->mutable_node(i)->set_name("n" + std::to_string(i));
  }
  auto model = importOnnxProto(proto, "test", ".");
  EXPECT_TRUE(model) << model.status().toString();
  return model ? model.take() : Model{};
}

} // namespace kiln::testing
