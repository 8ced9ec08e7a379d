// The --soc_version table: lookups, capabilities per family, hardware numbers and ATC's errors.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "kiln/backends/soc_versions.h"

using namespace kiln;

TEST(SocVersions, EveryListedStringIsFound) {
  const std::set<std::string> expected = {"Ascend310",         "Ascend310B1",    "Ascend310B4",
                                          "Ascend310P1",       "Ascend310P3",    "Ascend310P5",
                                          "Ascend310P7",       "Ascend910",      "Ascend910A",
                                          "Ascend910B",        "Ascend910ProA",  "Ascend910ProB",
                                          "Ascend910PremiumA", "Ascend910B1",    "Ascend910B2",
                                          "Ascend910B2C",      "Ascend910B3",    "Ascend910B4",
                                          "Ascend910B4-1",     "Ascend910_9391", "Ascend910_9381",
                                          "Ascend910_9392",    "Ascend910_9382", "Ascend910_9372",
                                          "Ascend910_9362",    "Ascend035",      "Ascend035A",
                                          "Ascend035B",        "Ascend610",      "BS9SX1AA",
                                          "BS9SX1AB",          "BS9SX1AC",       "MC62"};
  for (const std::string& name : expected) {
    const SocInfo* soc = findSoc(name);
    ASSERT_NE(soc, nullptr) << name;
    EXPECT_EQ(soc->name, name);
  }
  std::set<std::string> names;
  for (const std::string& n : socNames())
    EXPECT_TRUE(names.insert(n).second) << "duplicate " << n;
  for (const std::string& name : expected)
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(SocVersions, LookupIsExact) {
  EXPECT_EQ(findSoc("ascend310p3"), nullptr); // ATC matches the INI file name exactly
  EXPECT_EQ(findSoc("Ascend310P3 "), nullptr);
  EXPECT_EQ(findSoc(""), nullptr);
  EXPECT_EQ(findSoc("Ascend710"), nullptr); // the 2020 name; current tools use Ascend310P*
  EXPECT_EQ(findSoc("Hi3796CV300ES"), nullptr);
}

TEST(SocVersions, Ascend950AcceptsChipAndNpuName) {
  const SocInfo* soc = findSoc("Ascend950PR_9572");
  ASSERT_NE(soc, nullptr);
  EXPECT_EQ(soc->family, SocFamily::Ascend950);
  EXPECT_TRUE(soc->hif8);
  EXPECT_FALSE(soc->ubFusion);
  EXPECT_NE(findSoc("Ascend950DT_95ab"), nullptr);
  EXPECT_EQ(findSoc("Ascend950PR_"), nullptr);
  EXPECT_EQ(findSoc("Ascend950PR_9 5"), nullptr);
  EXPECT_EQ(findSoc("Ascend950"), nullptr);
}

TEST(SocVersions, Bf16OnlyWhereTheChipHasIt) {
  for (const SocInfo& soc : socTable()) {
    bool expectBf16 = soc.family == SocFamily::Ascend910B ||
                      soc.family == SocFamily::Ascend910_93 ||
                      soc.family == SocFamily::Ascend310B || soc.family == SocFamily::Ascend950;
    EXPECT_EQ(soc.bf16, expectBf16) << soc.name;
    EXPECT_EQ(soc.supportsDType(DType::BFloat16), expectBf16) << soc.name;
    EXPECT_TRUE(soc.supportsDType(DType::Float16)) << soc.name;
    EXPECT_TRUE(soc.supportsDType(DType::Float32)) << soc.name;
    EXPECT_TRUE(soc.supportsDType(DType::Int8)) << soc.name;
    EXPECT_EQ(soc.hif8, soc.family == SocFamily::Ascend950) << soc.name;
  }
  // The first-generation "Ascend910B" is not an A2 chip.
  EXPECT_EQ(findSoc("Ascend910B")->family, SocFamily::Ascend910);
  EXPECT_FALSE(findSoc("Ascend910B")->bf16);
  EXPECT_TRUE(findSoc("Ascend910B1")->bf16);
}

TEST(SocVersions, CoreTypesAndFeatureDifferences) {
  for (const SocInfo& soc : socTable()) {
    EXPECT_TRUE(soc.supportsCoreType(CoreType::AiCore)) << soc.name;
    EXPECT_EQ(soc.supportsCoreType(CoreType::VectorCore), soc.family == SocFamily::Ascend310P)
        << soc.name;
    EXPECT_EQ(soc.mode30Only, soc.family == SocFamily::Ascend035) << soc.name;
  }
  EXPECT_FALSE(findSoc("Ascend035")->singleOp);
  EXPECT_FALSE(findSoc("Ascend035")->shapeRange);
  EXPECT_FALSE(findSoc("Ascend310B1")->shapeRange);
  EXPECT_TRUE(findSoc("Ascend310P3")->shapeRange);
  EXPECT_FALSE(findSoc("Ascend910B1")->caffe);
  EXPECT_TRUE(findSoc("Ascend910B1")->splitCubeVector);
  EXPECT_TRUE(findSoc("Ascend310P3")->caffe);
}

TEST(SocVersions, HardwareNumbers) {
  const SocInfo* p3 = findSoc("Ascend310P3");
  ASSERT_TRUE(p3->hardware);
  EXPECT_EQ(p3->hardware->ccecVersion, "dav-m200");
  EXPECT_EQ(p3->hardware->aiCoreCount, 8);
  EXPECT_EQ(p3->hardware->vectorCoreCount, 7);
  EXPECT_EQ(p3->hardware->aiCpuCount, 16);
  EXPECT_EQ(p3->hardware->l2Bytes, 16u << 20);
  EXPECT_EQ(p3->hardware->cubeFreqMhz, 1060);

  const SocInfo* a310 = findSoc("Ascend310");
  ASSERT_TRUE(a310->hardware);
  EXPECT_EQ(a310->hardware->ubBytes, 253952u);
  EXPECT_EQ(a310->hardware->aiCoreCount, 2);

  const SocInfo* b1 = findSoc("Ascend910B1");
  ASSERT_TRUE(b1->hardware);
  EXPECT_EQ(b1->hardware->aicVersion, "AIC-C-220");
  EXPECT_EQ(b1->hardware->vectorCoreCount, 48);
  EXPECT_EQ(b1->hardware->l2Bytes, 192u << 20);
  EXPECT_EQ(b1->hardware->ubBytes, 192u << 10);

  EXPECT_EQ(findSoc("Ascend910ProB")->hardware->cubeFreqMhz, 1150);
  EXPECT_EQ(findSoc("Ascend035")->hardware->ubBytes, 32u << 10);
  EXPECT_FALSE(findSoc("MC62")->hardware); // nothing is known about it
}

TEST(SocVersions, UnknownValueGivesAtcErrorWithTheValidList) {
  Status st = checkSocVersion("Ascend999");
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), ErrorCode::SocVersionUnknown);
  EXPECT_EQ(st.peerCode(), "E20101");
  EXPECT_NE(st.message().find("Value [Ascend999] for parameter"), std::string::npos);
  for (const std::string& name : socNames())
    EXPECT_NE(st.message().find(name), std::string::npos) << name;

  Status empty = checkSocVersion("");
  EXPECT_EQ(empty.code(), ErrorCode::SocVersionUnknown);
  EXPECT_EQ(empty.peerCode(), "E10054");
  EXPECT_NE(empty.message().find("--soc_version for ATC is empty"), std::string::npos);

  EXPECT_TRUE(checkSocVersion("Ascend310P3").isOk());
}
