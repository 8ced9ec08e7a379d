// converter_lite's --configFile: the INI sections and keys MindSpore Lite's converter reads,
// parsed and range-checked into one struct; only what kiln acts on is typed, the rest is kept.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/image_preprocess.h"
#include "kiln/passes/pass.h"
#include "kiln/support/status.h"

namespace kiln {

// One `key=value` line as written, for messages and for keys kiln accepts but does not act on.
struct ConfigEntry {
  std::string value;
  int line = 0;
};

struct ConverterConfig {
  std::string path; // the file the config came from ("" when none was given)

  // [common_quant_param]
  std::string quantType; // "" (no quantization), WEIGHT_QUANT, FULL_QUANT, DYNAMIC_QUANT
  int bitNum = 8;
  uint64_t minQuantWeightSize = 0;
  int64_t minQuantWeightChannel = 16;
  std::vector<std::string> skipQuantNode;
  bool enableEncode = true;

  // [weight_quant_param]
  bool perChannel = true;
  bool biasCorrection = true;
  std::string dequantStrategy = "DEFAULT";
  std::string quantStrategy = "MAX_MIN";

  // FULL_QUANT: [data_preprocess_param] and [full_quant_param]
  std::map<std::string, std::string> calibratePath; // graph input name -> folder of samples
  size_t calibrateSize = 0;                         // 0: every sample
  std::string calibrateInputType = "BIN";           // BIN (.bin/.npy/.pb files) or IMAGE
  ImagePreprocess image;                            // IMAGE: channel order, resize, crop, normalize
  std::string activationQuantMethod = "MAX_MIN";    // MAX_MIN, KL, REMOVAL_OUTLIER, MSE (kiln's)
  bool fullQuantPerChannel = true;
  bool fullQuantBiasCorrection = true; // QdqOptions::biasCorrection
  // kiln's extensions of [full_quant_param] (converter_lite has no such keys):
  // kiln_equalize_channels (QdqOptions::equalizeChannels) and kiln_target_cosine (the
  // accuracy-aware keep list of `kiln quantize --target-cosine`).
  bool equalizeChannels = true;
  std::optional<double> targetCosine;
  // [dynamic_quant_param]: ALWC (activations per layer, weights per channel) or ACWL
  std::string dynamicQuantStrategy = "ALWC";

  // [registry]
  bool disableFusion = false;
  std::vector<std::string> fusionBlacklists;
  std::vector<std::string> pluginPaths;

  // Every entry by section then key, including the typed ones above.
  std::map<std::string, std::map<std::string, ConfigEntry>> sections;

  bool has(const std::string& section, const std::string& key) const;
};

// Parses INI text: `[section]` lines, `key=value` lines (split at the first '='), blank lines and
// lines starting with '#' or ';'. Unknown sections and keys, values of the wrong kind or out of
// range, keys given twice and keys outside a section give ErrorCode::ConverterConfigInvalid with
// peer code -600 naming `displayName`, the line, the section and the key; a valid request kiln
// does not carry out (mixed-bit bit_num=0, GPTQ, per-layer, plugins)
// gives the same code with peer -7 (RET_NOT_SUPPORT).
Expected<ConverterConfig> parseConverterConfigText(const std::string& text,
                                                   const std::string& displayName);
// Reads `path` (K1001/K1002 with peer -600 when it cannot) and parses it.
Expected<ConverterConfig> parseConverterConfigFile(const std::string& path);

// The quantize-weights options for quant_type=WEIGHT_QUANT (asymmetric, as converter_lite
// quantizes on the CPU path); false when the config asks for no weight quantization.
bool weightQuantOptionsFor(const ConverterConfig& config, WeightQuantOptions& options);

// quant_type=DYNAMIC_QUANT: the quantize-weights options (MatMul / Gemm weights and Gather tables
// to int8, symmetric, per output column for ALWC or per tensor for ACWL, no bias correction, as
// converter_lite's dynamic quantizer) and whether activations are quantized per row (ACWL);
// false when the config asks for another quant type.
bool dynamicQuantOptionsFor(const ConverterConfig& config, WeightQuantOptions& options,
                            bool& activationPerRow);

// Notes for entries kiln accepts but does not act on (other devices, micro code generation,
// calibration settings without FULL_QUANT, ...), one per entry, naming file, line and key.
std::vector<std::string> ignoredConfigNotes(const ConverterConfig& config);

// `text` (a converter_lite config, possibly empty) with [common_quant_param] skip_quant_node set to
// `skip` and, when the section lacks them, quant_type=WEIGHT_QUANT and bit_num=`bitNum`; other
// lines are kept as written.
std::string withSkipQuantNodes(const std::string& text, const std::vector<std::string>& skip,
                               int bitNum);

} // namespace kiln
