// Shape-spec grammar (ATC and converter_lite) and validation against graph inputs.
#include <gtest/gtest.h>

#include "kiln/shape_spec.h"

using namespace kiln;

namespace {

Status parseError(const std::string& text, ShapeDialect dialect = ShapeDialect::Atc) {
  auto spec = parseShapeSpec(text, dialect);
  EXPECT_FALSE(spec.hasValue()) << text;
  return spec.hasValue() ? Status::ok() : spec.status();
}

struct OneInputGraph {
  Graph graph{"g"};
  explicit OneInputGraph(std::vector<Dim> dims, std::string name = "x") {
    Value* x = graph.addValue(name);
    x->setType(ValueType::tensor(DType::Float32, Shape(std::move(dims))));
    graph.addInput(x);
    graph.addOutput(x);
  }
};

} // namespace

TEST(ShapeSpec, AtcNamedStaticRangesAndUnknown) {
  auto spec = parseShapeSpec("x:1,3,224,224;y:1~4,-1;tf:name:0:2;", ShapeDialect::Atc);
  ASSERT_TRUE(spec.hasValue()) << spec.status().toString();
  ASSERT_EQ(spec->inputs.size(), 3u);
  EXPECT_EQ(spec->inputs[0].name, "x");
  EXPECT_EQ(spec->inputs[0].dimsText(), "1,3,224,224");
  EXPECT_TRUE(spec->inputs[1].dims[0].ranged);
  EXPECT_EQ(spec->inputs[1].dims[0].hi, 4);
  EXPECT_TRUE(spec->inputs[1].dims[1].isUnknown());
  EXPECT_EQ(spec->inputs[2].name, "tf:name:0"); // split at the last ':'
  EXPECT_TRUE(spec->hasDynamic());
}

TEST(ShapeSpec, AtcScalarAndPositional) {
  auto scalar = parseShapeSpec("s:", ShapeDialect::Atc);
  ASSERT_TRUE(scalar.hasValue());
  EXPECT_TRUE(scalar->inputs[0].dims.empty());
  auto positional = parseShapeSpec("1~2,3;4,5", ShapeDialect::Atc);
  ASSERT_TRUE(positional.hasValue());
  EXPECT_TRUE(positional->positional);
  EXPECT_EQ(positional->inputs[1].position, 1u);
}

TEST(ShapeSpec, AtcErrorsCarryAtcCodes) {
  Status s = parseError("x:1,3.5,224");
  EXPECT_EQ(s.peerCode(), "E10002");
  EXPECT_NE(s.message().find("The float number is unsupported"), std::string::npos) << s.message();
  s = parseError("x:1,a,224");
  EXPECT_EQ(s.peerCode(), "E10002");
  EXPECT_NE(s.message().find("It is not a digit"), std::string::npos);
  s = parseError("x:1,0,224");
  EXPECT_EQ(s.peerCode(), "E10011");
  EXPECT_NE(s.message().find("The error value in the shape is 0"), std::string::npos);
  s = parseError("x:1,99999999999999999999");
  EXPECT_EQ(s.peerCode(), "E10013");
  s = parseError(":1,2");
  EXPECT_NE(s.message().find("The input name is empty"), std::string::npos);
  s = parseError("x:1;y");
  EXPECT_NE(s.message().find("two parts: name and value"), std::string::npos);
  EXPECT_EQ(s.code(), ErrorCode::ShapeSpecSyntax);
}

TEST(ShapeSpec, ConverterLiteRejectsNegativeAndEmpty) {
  Status s = parseError("x:1,-1,3", ShapeDialect::ConverterLite);
  EXPECT_NE(s.message().find("INPUT ILLEGAL: Unsupported dim < 0."), std::string::npos)
      << s.message();
  s = parseError("x:", ShapeDialect::ConverterLite);
  EXPECT_NE(s.message().find("has no dims"), std::string::npos);
  auto ok = parseShapeSpec("in.0:1,32,32,3", ShapeDialect::ConverterLite);
  ASSERT_TRUE(ok.hasValue());
  EXPECT_EQ(ok->inputs[0].name, "in.0");
}

TEST(ShapeSpec, ValidationNamesUnknownInputsAndListsRealOnes) {
  OneInputGraph g({Dim::symbol("N"), Dim::known(3), Dim(), Dim()});
  auto spec = parseShapeSpec("image:1,3,640,640", ShapeDialect::Atc);
  auto problems = validateShapeSpec(*spec, g.graph);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].peerCode(), "E10016");
  EXPECT_NE(problems[0].hint().find("the model's inputs are: x"), std::string::npos);
}

TEST(ShapeSpec, ValidationRankMismatch) {
  OneInputGraph g({Dim::symbol("N"), Dim::known(3), Dim(), Dim()});
  auto problems = validateShapeSpec(*parseShapeSpec("x:1,3,640", ShapeDialect::Atc), g.graph);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code(), ErrorCode::ShapeSpecRankMismatch);
  EXPECT_NE(problems[0].message().find("Dimension count 3"), std::string::npos);
}

TEST(ShapeSpec, ValidationNamesNhwcNchwMixUp) {
  OneInputGraph g({Dim::symbol("N"), Dim::known(3), Dim::symbol("H"), Dim::symbol("W")});
  auto problems = validateShapeSpec(*parseShapeSpec("x:1,640,640,3", ShapeDialect::Atc), g.graph);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].code(), ErrorCode::ShapeSpecDimMismatch);
  EXPECT_NE(problems[0].hint().find("looks like NHWC but the model input is NCHW"),
            std::string::npos)
      << problems[0].hint();
  EXPECT_NE(problems[0].hint().find("use 1,3,640,640"), std::string::npos) << problems[0].hint();
}

TEST(ShapeSpec, ValidationAcceptsMatchingShape) {
  OneInputGraph g({Dim::symbol("N"), Dim::known(3), Dim(), Dim()});
  EXPECT_TRUE(
      validateShapeSpec(*parseShapeSpec("x:1,3,640,640", ShapeDialect::Atc), g.graph).empty());
}

TEST(DynamicProfiles, AtcRules) {
  auto spec = parseShapeSpec("x:-1,3,224,224", ShapeDialect::Atc);
  DynamicProfiles batch;
  batch.batchSize = "1,2,4";
  EXPECT_TRUE(validateDynamicProfiles(batch, "x:-1,3,224,224", &*spec).isOk());
  EXPECT_EQ(batch.gears.size(), 3u);

  DynamicProfiles both;
  both.batchSize = "1,2";
  both.dims = "1;2";
  EXPECT_EQ(validateDynamicProfiles(both, "x:-1,3,224,224", &*spec).peerCode(), "E10009");

  DynamicProfiles one;
  one.batchSize = "4";
  EXPECT_EQ(validateDynamicProfiles(one, "x:-1,3,224,224", &*spec).peerCode(), "E10035");

  DynamicProfiles dup;
  dup.batchSize = "2,2";
  EXPECT_EQ(validateDynamicProfiles(dup, "x:-1,3,224,224", &*spec).peerCode(), "E10039");

  auto hw = parseShapeSpec("x:1,3,-1,-1", ShapeDialect::Atc);
  DynamicProfiles batchOnHw;
  batchOnHw.batchSize = "1,2";
  EXPECT_EQ(validateDynamicProfiles(batchOnHw, "x:1,3,-1,-1", &*hw).peerCode(), "E10018");
  DynamicProfiles image;
  image.imageSize = "224,224;448,448";
  EXPECT_TRUE(validateDynamicProfiles(image, "x:1,3,-1,-1", &*hw).isOk());
  DynamicProfiles dims;
  dims.dims = "224;448";
  dims.inputFormat = "ND";
  EXPECT_EQ(validateDynamicProfiles(dims, "x:1,3,-1,-1", &*hw).peerCode(), "E10003");
  // ATC's cross-flag rules: dims gears need ND; image gears need a 4-D input with -1 on H/W.
  DynamicProfiles dimsNchw;
  dimsNchw.dims = "224,224;448,448";
  dimsNchw.inputFormat = "NCHW";
  EXPECT_EQ(validateDynamicProfiles(dimsNchw, "x:1,3,-1,-1", &*hw).peerCode(), "E10001");
  DynamicProfiles dimsUnset;
  dimsUnset.dims = "224,224;448,448";
  EXPECT_EQ(validateDynamicProfiles(dimsUnset, "x:1,3,-1,-1", &*hw).peerCode(), "E10001");
  dimsUnset.inputFormat = "ND";
  EXPECT_TRUE(validateDynamicProfiles(dimsUnset, "x:1,3,-1,-1", &*hw).isOk());
  auto rank3 = parseShapeSpec("x:1,-1,-1", ShapeDialect::Atc);
  DynamicProfiles imageRank3;
  imageRank3.imageSize = "224,224;448,448";
  EXPECT_EQ(validateDynamicProfiles(imageRank3, "x:1,-1,-1", &*rank3).peerCode(), "E10019");
  DynamicProfiles noShape;
  noShape.batchSize = "1,2";
  EXPECT_EQ(validateDynamicProfiles(noShape, "", nullptr).peerCode(), "E10004");
}
