// converter_lite --configFile parsing: typed quant keys, range checks, unknown sections/keys and
// the requests kiln does not carry out, each with its file, line, section and key.
#include <gtest/gtest.h>

#include "kiln/backends/converter_config.h"

using namespace kiln;

namespace {

Status errorOf(const std::string& text) {
  auto parsed = parseConverterConfigText(text, "cfg.ini");
  EXPECT_FALSE(parsed) << "expected an error for:\n" << text;
  return parsed ? Status::ok() : parsed.status();
}

} // namespace

TEST(ConverterConfig, WeightQuantKeysAreTyped) {
  auto config = parseConverterConfigText("# weight quant\n"
                                         "[common_quant_param]\n"
                                         "quant_type = WEIGHT_QUANT\n"
                                         "bit_num=8\n"
                                         "min_quant_weight_size=100\n"
                                         "min_quant_weight_channel=4\n"
                                         "skip_quant_node= conv1 , fc2\n"
                                         "\n"
                                         "[weight_quant_param]\n"
                                         "per_channel=True\n",
                                         "cfg.ini");
  ASSERT_TRUE(config) << config.status().toString();
  EXPECT_EQ(config->quantType, "WEIGHT_QUANT");
  EXPECT_EQ(config->bitNum, 8);
  EXPECT_EQ(config->minQuantWeightSize, 100u);
  EXPECT_EQ(config->minQuantWeightChannel, 4);
  EXPECT_EQ(config->skipQuantNode, (std::vector<std::string>{"conv1", "fc2"}));
  EXPECT_TRUE(config->has("weight_quant_param", "per_channel"));

  WeightQuantOptions options;
  ASSERT_TRUE(weightQuantOptionsFor(*config, options));
  EXPECT_EQ(options.bitNum, 8);
  EXPECT_FALSE(options.symmetric); // converter_lite quantizes weights asymmetrically
  EXPECT_EQ(options.minQuantWeightSize, 100u);
  EXPECT_EQ(options.minQuantWeightChannel, 4);
  EXPECT_EQ(options.skipNodes, config->skipQuantNode);
  EXPECT_TRUE(ignoredConfigNotes(*config).empty());
}

TEST(ConverterConfig, DefaultsMatchConverterLite) {
  auto config = parseConverterConfigText("[common_quant_param]\nquant_type=WEIGHT_QUANT\n", "c");
  ASSERT_TRUE(config) << config.status().toString();
  WeightQuantOptions options;
  ASSERT_TRUE(weightQuantOptionsFor(*config, options));
  EXPECT_EQ(options.bitNum, 8);
  EXPECT_EQ(options.minQuantWeightSize, 0u);
  EXPECT_EQ(options.minQuantWeightChannel, 16);

  auto empty = parseConverterConfigText("", "c");
  ASSERT_TRUE(empty);
  EXPECT_FALSE(weightQuantOptionsFor(*empty, options));
}

TEST(ConverterConfig, UnknownKeyNamesFileLineSectionAndKey) {
  Status s = errorOf("[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_nums=8\n");
  EXPECT_EQ(s.code(), ErrorCode::ConverterConfigInvalid);
  EXPECT_EQ(s.peerCode(), "-600");
  EXPECT_NE(s.message().find("cfg.ini:3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("INPUT ILLEGAL: `bit_nums` is not supported in [common_quant_param]"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.hint().find("did you mean `bit_num`"), std::string::npos) << s.hint();
}

TEST(ConverterConfig, UnknownSectionSuggestsTheRealName) {
  Status s = errorOf("[common_quantize_param]\nquant_type=WEIGHT_QUANT\n");
  EXPECT_EQ(s.code(), ErrorCode::ConverterConfigInvalid);
  EXPECT_NE(s.message().find("cfg.ini:1"), std::string::npos);
  EXPECT_NE(s.message().find("[common_quantize_param]"), std::string::npos);
  EXPECT_NE(s.hint().find("did you mean [common_quant_param]"), std::string::npos) << s.hint();
}

TEST(ConverterConfig, RangesAndKindsAreChecked) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=17\n",
       "bit_num should be in [0, 16]"},
      {"[common_quant_param]\nbit_num=eight\n", "bit_num must be an integer"},
      {"[common_quant_param]\nmin_quant_weight_size=65536\n", "[0, 65535]"},
      {"[common_quant_param]\nmin_quant_weight_channel=-1\n", "[0, 65535]"},
      {"[common_quant_param]\nquant_type=weight_quant\n", "WEIGHT_QUANT|FULL_QUANT|DYNAMIC_QUANT"},
      {"[common_quant_param]\nenable_encode=yes\n", "true or false"},
      {"[mixed_bit_weight_quant_param]\ninit_scale=1\n", "init_scale must be a number in (0, 1)"},
      {"[mixed_bit_weight_quant_param]\nmax_iterations=39\n", "[40, 65535]"},
      {"[registry]\ndisable_fusion=true\n", "on or off"},
      {"[data_preprocess_param]\ncalibrate_size=0\n", "[1, 65535]"},
      {"[common_quant_param]\nquant_type=WEIGHT_QUANT\nquant_type=WEIGHT_QUANT\n", "given twice"},
      {"quant_type=WEIGHT_QUANT\n", "before any [section]"},
      {"[common_quant_param]\nquant_type\n", "neither [section] nor key=value"},
      {"[common_quant_param\n", "no closing ']'"},
      {"[common_quant_param]\nbit_num=\n", "has no value"},
      {"[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=4\nenable_encode=false\n",
       "needs enable_encode=true"},
      {"[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=4\n", "takes bit_num=8 only"},
      {"[cpu_option_cfg_param]\narchitecture=ARM64\n", "needs both architecture and instruction"},
      {"[common_quant_param]\nquant_type=FULL_QUANT\n", "calibrate_path is not set"},
      {"[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=/"
       "data\n",
       "'/data' is not INPUT_NAME:FOLDER"},
      {"[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\n"
       "calibrate_path=x:/a,x:/b\n",
       "names input 'x' twice"},
  };
  for (const Case& c : cases) {
    Status s = errorOf(c.text);
    EXPECT_EQ(s.code(), ErrorCode::ConverterConfigInvalid) << c.text;
    EXPECT_EQ(s.peerCode(), "-600") << c.text;
    EXPECT_NE(s.message().find(c.needle), std::string::npos)
        << "message: " << s.message() << "\nexpected: " << c.needle;
    EXPECT_FALSE(s.hint().empty()) << c.text;
  }
}

TEST(ConverterConfig, RequestsKilnDoesNotCarryOutSayNotSupported) {
  const char* cases[] = {
      "[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=0\n",
      "[common_quant_param]\nquant_type=WEIGHT_QUANT\n[weight_quant_param]\nquant_strategy=GPTQ\n",
      "[common_quant_param]\nquant_type=WEIGHT_QUANT\n[weight_quant_param]\nper_channel=false\n",
      "[registry]\nplugin_path=./libplugin.so\n",
      "[model_param]\nfmk=ONNX\n",
  };
  for (const char* text : cases) {
    Status s = errorOf(text);
    EXPECT_EQ(s.code(), ErrorCode::ConverterConfigInvalid) << text;
    EXPECT_EQ(s.peerCode(), "-7") << text;
    EXPECT_NE(s.message().find("not supported"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("cfg.ini:"), std::string::npos) << s.message();
  }
}

// DYNAMIC_QUANT is carried out (ms_convert.cpp): int8 symmetric MatMul/Gemm weights (and Gather
// tables), per output column for ALWC (the default) and per tensor for ACWL, no size filters, no
// bias correction.
TEST(ConverterConfig, DynamicQuantGivesSymmetricMatMulWeights) {
  auto alwc = parseConverterConfigText("[common_quant_param]\nquant_type=DYNAMIC_QUANT\n"
                                       "min_quant_weight_size=5000\n",
                                       "cfg.ini");
  ASSERT_TRUE(alwc) << alwc.status().toString();
  WeightQuantOptions options;
  bool perRow = true;
  ASSERT_TRUE(dynamicQuantOptionsFor(*alwc, options, perRow));
  EXPECT_FALSE(perRow);
  EXPECT_TRUE(options.perChannel);
  EXPECT_TRUE(options.symmetric);
  EXPECT_FALSE(options.biasCorrection);
  EXPECT_EQ(options.minQuantWeightSize, 0u);
  EXPECT_EQ(options.ops, (std::vector<std::string>{"MatMul", "Gemm", "Gather"}));
  EXPECT_FALSE(weightQuantOptionsFor(*alwc, options));
  // min_quant_weight_size is read by WEIGHT_QUANT only: said so.
  auto notes = ignoredConfigNotes(*alwc);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("quant_type=DYNAMIC_QUANT does not read it"), std::string::npos)
      << notes[0];

  auto acwl = parseConverterConfigText("[common_quant_param]\nquant_type=DYNAMIC_QUANT\n"
                                       "[dynamic_quant_param]\nquant_strategy=ACWL\n",
                                       "cfg.ini");
  ASSERT_TRUE(acwl) << acwl.status().toString();
  ASSERT_TRUE(dynamicQuantOptionsFor(*acwl, options, perRow));
  EXPECT_TRUE(perRow);
  EXPECT_FALSE(options.perChannel);
  EXPECT_TRUE(ignoredConfigNotes(*acwl).empty());

  auto weight = parseConverterConfigText("[common_quant_param]\nquant_type=WEIGHT_QUANT\n"
                                         "[dynamic_quant_param]\nquant_strategy=ACWL\n",
                                         "cfg.ini");
  ASSERT_TRUE(weight) << weight.status().toString();
  EXPECT_FALSE(dynamicQuantOptionsFor(*weight, options, perRow));
  notes = ignoredConfigNotes(*weight);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no quant_type=DYNAMIC_QUANT is set"), std::string::npos) << notes[0];
}

TEST(ConverterConfig, AcceptedButIgnoredEntriesAreNoted) {
  auto config = parseConverterConfigText("[registry]\n"
                                         "disable_fusion=on\n"
                                         "fusion_blacklists=ConvActivationFusion, MatMulAddFusion\n"
                                         "[ascend_context]\n"
                                         "provider=ge\n"
                                         "[common_quant_param]\n"
                                         "bit_num=8\n",
                                         "cfg.ini");
  ASSERT_TRUE(config) << config.status().toString();
  EXPECT_TRUE(config->disableFusion);
  EXPECT_EQ(config->fusionBlacklists,
            (std::vector<std::string>{"ConvActivationFusion", "MatMulAddFusion"}));
  auto notes = ignoredConfigNotes(*config);
  ASSERT_EQ(notes.size(), 2u);
  // Sections print in name order: ascend_context, common_quant_param.
  EXPECT_NE(notes[0].find("cfg.ini:5: [ascend_context] provider=ge"), std::string::npos)
      << notes[0];
  EXPECT_NE(notes[1].find("no quant_type=WEIGHT_QUANT"), std::string::npos) << notes[1];
}

TEST(ConverterConfig, FullQuantKeysAreTyped) {
  auto config = parseConverterConfigText("[common_quant_param]\n"
                                         "quant_type=FULL_QUANT\n"
                                         "bit_num=8\n"
                                         "[data_preprocess_param]\n"
                                         "calibrate_path=x:/data/x, mask : /data/m:2\n"
                                         "calibrate_size=50\n"
                                         "input_type=BIN\n"
                                         "[full_quant_param]\n"
                                         "activation_quant_method=KL\n"
                                         "per_channel=false\n"
                                         "bias_correction=false\n",
                                         "cfg.ini");
  ASSERT_TRUE(config) << config.status().toString();
  EXPECT_EQ(config->calibratePath,
            (std::map<std::string, std::string>{{"x", "/data/x"}, {"mask", "/data/m:2"}}));
  EXPECT_EQ(config->calibrateSize, 50u);
  EXPECT_EQ(config->activationQuantMethod, "KL");
  EXPECT_FALSE(config->fullQuantPerChannel);
  // bias_correction is acted on (it used to be noted as ignored); converter_lite's default is on.
  EXPECT_FALSE(config->fullQuantBiasCorrection);
  EXPECT_TRUE(ConverterConfig{}.fullQuantBiasCorrection);
  EXPECT_EQ(ignoredConfigNotes(*config), std::vector<std::string>{});
}

TEST(ConverterConfig, KilnFullQuantExtensionsAreTypedAndActedOn) {
  auto config = parseConverterConfigText("[common_quant_param]\n"
                                         "quant_type=FULL_QUANT\n"
                                         "[data_preprocess_param]\n"
                                         "calibrate_path=x:/data/x\n"
                                         "[full_quant_param]\n"
                                         "activation_quant_method=MSE\n"
                                         "kiln_equalize_channels=false\n"
                                         "kiln_target_cosine=0.999\n",
                                         "cfg.ini");
  ASSERT_TRUE(config) << config.status().toString();
  EXPECT_EQ(config->activationQuantMethod, "MSE");
  EXPECT_FALSE(config->equalizeChannels);
  ASSERT_TRUE(config->targetCosine);
  EXPECT_DOUBLE_EQ(*config->targetCosine, 0.999);
  EXPECT_TRUE(ignoredConfigNotes(*config).empty());
  // On by default; a cosine outside (0, 1] is refused.
  auto defaults = parseConverterConfigText(
      "[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=x:/d\n",
      "cfg.ini");
  ASSERT_TRUE(defaults) << defaults.status().toString();
  EXPECT_TRUE(defaults->equalizeChannels);
  EXPECT_FALSE(defaults->targetCosine);
  EXPECT_FALSE(parseConverterConfigText("[full_quant_param]\nkiln_target_cosine=1.5\n", "cfg.ini"));
}

TEST(ConverterConfig, FullQuantImageKeysAreTyped) {
  auto config = parseConverterConfigText("[common_quant_param]\n"
                                         "quant_type=FULL_QUANT\n"
                                         "[data_preprocess_param]\n"
                                         "calibrate_path=x:/images\n"
                                         "input_type=IMAGE\n"
                                         "image_to_format=RGB\n"
                                         "normalize_mean=[123.675, 116.28, 103.53]\n"
                                         "normalize_std=[58.395,57.12,57.375]\n"
                                         "resize_width=256\n"
                                         "resize_height=256\n"
                                         "resize_method=CUBIC\n"
                                         "center_crop_width=224\n"
                                         "center_crop_height=224\n",
                                         "cfg.ini");
  ASSERT_TRUE(config) << config.status().toString();
  EXPECT_EQ(config->calibrateInputType, "IMAGE");
  EXPECT_EQ(config->image.toFormat, "RGB");
  EXPECT_EQ(config->image.mean, (std::vector<float>{123.675f, 116.28f, 103.53f}));
  EXPECT_EQ(config->image.std, (std::vector<float>{58.395f, 57.12f, 57.375f}));
  EXPECT_EQ(config->image.resizeWidth, 256);
  EXPECT_EQ(config->image.resizeMethod, "CUBIC");
  EXPECT_EQ(config->image.cropHeight, 224);
  EXPECT_TRUE(ignoredConfigNotes(*config).empty());
  const char* bad[] = {"normalize_std=[1, 0, 1]\n", "normalize_mean=1,2,3\n", "resize_width=10\n",
                       "center_crop_height=5\n"};
  for (const char* line : bad) {
    auto refused = parseConverterConfigText(
        std::string("[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\n"
                    "calibrate_path=x:/images\n") +
            line,
        "cfg.ini");
    ASSERT_FALSE(refused) << line;
    EXPECT_EQ(refused.status().peerCode(), "-600") << line;
  }
}

TEST(ConverterConfig, MissingFileIsFileNotFound) {
  auto config = parseConverterConfigFile("/nonexistent/dir/cfg.ini");
  ASSERT_FALSE(config);
  EXPECT_EQ(config.status().code(), ErrorCode::FileNotFound);
  EXPECT_EQ(config.status().peerCode(), "-600");
  EXPECT_NE(config.status().message().find("/nonexistent/dir/cfg.ini"), std::string::npos);
}

TEST(ConverterConfig, WithSkipQuantNodesEditsOnlyTheSkipLine) {
  std::string config = "# tuned\n[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\n"
                       "skip_quant_node=old\n\n[weight_quant_param]\nbias_correction=true\n";
  EXPECT_EQ(withSkipQuantNodes(config, {"old", "a", "b"}, 8),
            "# tuned\n[common_quant_param]\nskip_quant_node=old,a,b\nquant_type=WEIGHT_QUANT\n"
            "bit_num=8\n\n[weight_quant_param]\nbias_correction=true\n");
  // No config: a section with converter_lite's quant_type and the bit width.
  EXPECT_EQ(withSkipQuantNodes("", {"a"}, 4),
            "[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=4\nskip_quant_node=a\n");
  // A section without the keys gets them; an empty list writes no skip line.
  EXPECT_EQ(withSkipQuantNodes("[registry]\ndisable_fusion=off\n", {}, 8),
            "[registry]\ndisable_fusion=off\n\n[common_quant_param]\nquant_type=WEIGHT_QUANT\n"
            "bit_num=8\n");
}
