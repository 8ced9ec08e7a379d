// converter_lite --configFile parser: every section and key converter_lite knows, checked against
// its value ranges; the quantization keys kiln acts on are typed into ConverterConfig.
#include "kiln/backends/converter_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/support/input_file.h"
#include "kiln/support/suggest.h"

namespace kiln {
namespace {

enum class Kind { String, List, Bool, Int, Double, Enum, OnOff };

struct KeySpec {
  const char* key = nullptr;
  Kind kind = Kind::String;
  double lo = 0, hi = 0;           // Int/Double range (inclusive unless openRange)
  bool openRange = false;          // Double range excludes both ends
  std::vector<const char*> values; // Enum values
};

KeySpec keySpec(const char* key, Kind kind, double lo = 0, double hi = 0, bool openRange = false,
                std::vector<const char*> values = {}) {
  KeySpec spec;
  spec.key = key;
  spec.kind = kind;
  spec.lo = lo;
  spec.hi = hi;
  spec.openRange = openRange;
  spec.values = std::move(values);
  return spec;
}

struct SectionSpec {
  const char* name;
  std::vector<KeySpec> keys;
  bool anyKey = false; // the key set is long or device-specific: any key is kept
};

KeySpec str(const char* key) { return keySpec(key, Kind::String); }
KeySpec list(const char* key) { return keySpec(key, Kind::List); }
KeySpec boolean(const char* key) { return keySpec(key, Kind::Bool); }
KeySpec onOff(const char* key) { return keySpec(key, Kind::OnOff); }
KeySpec integer(const char* key, double lo, double hi) { return keySpec(key, Kind::Int, lo, hi); }
KeySpec number(const char* key, double lo, double hi, bool openRange) {
  return keySpec(key, Kind::Double, lo, hi, openRange);
}
KeySpec oneOf(const char* key, std::vector<const char*> values) {
  return keySpec(key, Kind::Enum, 0, 0, false, std::move(values));
}

const std::vector<SectionSpec>& sectionSpecs() {
  static const std::vector<SectionSpec> specs = {
      {"common_quant_param",
       {oneOf("quant_type", {"WEIGHT_QUANT", "FULL_QUANT", "DYNAMIC_QUANT"}),
        integer("bit_num", 0, 16), integer("min_quant_weight_size", 0, 65535),
        integer("min_quant_weight_channel", 0, 65535), list("skip_quant_node"),
        str("debug_info_save_path"), boolean("enable_encode"), str("workspace")}},
      {"mixed_bit_weight_quant_param",
       {number("init_scale", 0, 1, true), boolean("auto_tune"), boolean("use_cv_data"),
        integer("max_iterations", 40, 65535)}},
      {"weight_quant_param",
       {oneOf("dequant_strategy", {"DEFAULT", "ON_THE_FLY"}),
        oneOf("quant_strategy", {"MAX_MIN", "GPTQ"}), boolean("update_mindir"),
        integer("max_segments", 1, 65535), boolean("per_channel"), boolean("bias_correction")}},
      {"full_quant_param",
       {oneOf("activation_quant_method", {"MAX_MIN", "KL", "REMOVAL_OUTLIER", "MSE"}),
        boolean("bias_correction"), boolean("per_channel"),
        oneOf("target_device", {"KIRIN", "NVGPU", "DSP", "ASCEND"}),
        number("smooth_alpha", -1e300, 1e300, false), boolean("enable_smooth_shift"),
        // kiln's extensions (docs/quantization.md): converter_lite has no such keys
        boolean("kiln_equalize_channels"), number("kiln_target_cosine", 0, 1, true)}},
      {"data_preprocess_param",
       {str("calibrate_path"), integer("calibrate_size", 1, 65535),
        oneOf("input_type", {"IMAGE", "BIN"}), oneOf("image_to_format", {"RGB", "GRAY", "BGR"}),
        str("normalize_mean"), str("normalize_std"), integer("resize_width", 1, 65535),
        integer("resize_height", 1, 65535), oneOf("resize_method", {"LINEAR", "NEAREST", "CUBIC"}),
        integer("center_crop_width", 1, 65535), integer("center_crop_height", 1, 65535)}},
      {"dynamic_quant_param", {oneOf("quant_strategy", {"ALWC", "ACWL"})}},
      {"transform_quant_param", {oneOf("export_precision_mode", {"QUANT", "FLOAT32"})}},
      {"registry", {str("plugin_path"), onOff("disable_fusion"), list("fusion_blacklists")}},
      {"cpu_option_cfg_param",
       {oneOf("architecture", {"ARM64"}), oneOf("instruction", {"SIMD_DOT"})}},
      {"micro_param",
       {str("target"), str("codegen_mode"), str("debug_mode"), str("support_parallel"),
        str("enable_micro"), str("save_path"), str("project_name"), str("keep_original_weight"),
        str("changeable_weights_name"), str("inputs_shape"), str("dynamic_dim_params")}},
      {"acl_option_cfg_param",
       {str("device_id"), str("input_format"), str("input_shape_vector"), str("input_shape"),
        str("output_type"), str("precision_mode"), str("op_select_impl_mode"),
        str("fusion_switch_config_file_path"), str("dynamic_batch_size"), str("buffer_optimize"),
        str("insert_op_config_file_path"), str("dynamic_image_size"), str("dynamic_dims"),
        str("aoe_mode"), str("custom_opp_path")}},
      {"ascend_context", {}, true},
      {"graph_kernel_param", {}, true},
      {"om_converter", {}, true},
      {"aoe_global_options", {}, true},
      {"aoe_tuning_options", {}, true},
  };
  return specs;
}

// Keys that change what kiln writes, and the quant_type they need ("" for any); every other
// entry is reported as ignored.
struct ActedKey {
  const char* section;
  const char* key;
  std::vector<const char*> quantTypes; // empty: acted on whatever the quant type
};

const std::vector<ActedKey>& actedKeys() {
  static const std::vector<ActedKey> keys = {
      {"common_quant_param", "quant_type", {}},
      {"common_quant_param", "bit_num", {"WEIGHT_QUANT", "FULL_QUANT", "DYNAMIC_QUANT"}},
      {"common_quant_param", "skip_quant_node", {"WEIGHT_QUANT", "FULL_QUANT", "DYNAMIC_QUANT"}},
      {"common_quant_param", "min_quant_weight_size", {"WEIGHT_QUANT"}},
      {"common_quant_param", "min_quant_weight_channel", {"WEIGHT_QUANT"}},
      {"common_quant_param", "enable_encode", {"WEIGHT_QUANT"}},
      {"weight_quant_param", "dequant_strategy", {"WEIGHT_QUANT"}},
      {"weight_quant_param", "quant_strategy", {"WEIGHT_QUANT"}},
      {"weight_quant_param", "per_channel", {"WEIGHT_QUANT"}},
      {"weight_quant_param", "bias_correction", {"WEIGHT_QUANT"}},
      {"data_preprocess_param", "calibrate_path", {"FULL_QUANT"}},
      {"data_preprocess_param", "calibrate_size", {"FULL_QUANT"}},
      {"data_preprocess_param", "input_type", {"FULL_QUANT"}},
      {"data_preprocess_param", "image_to_format", {"FULL_QUANT"}},
      {"data_preprocess_param", "normalize_mean", {"FULL_QUANT"}},
      {"data_preprocess_param", "normalize_std", {"FULL_QUANT"}},
      {"data_preprocess_param", "resize_width", {"FULL_QUANT"}},
      {"data_preprocess_param", "resize_height", {"FULL_QUANT"}},
      {"data_preprocess_param", "resize_method", {"FULL_QUANT"}},
      {"data_preprocess_param", "center_crop_width", {"FULL_QUANT"}},
      {"data_preprocess_param", "center_crop_height", {"FULL_QUANT"}},
      {"full_quant_param", "activation_quant_method", {"FULL_QUANT"}},
      {"full_quant_param", "per_channel", {"FULL_QUANT"}},
      {"full_quant_param", "bias_correction", {"FULL_QUANT"}},
      {"full_quant_param", "kiln_equalize_channels", {"FULL_QUANT"}},
      {"full_quant_param", "kiln_target_cosine", {"FULL_QUANT"}},
      {"registry", "disable_fusion", {}},
      {"registry", "fusion_blacklists", {}},
      {"registry", "plugin_path", {}},
      {"dynamic_quant_param", "quant_strategy", {"DYNAMIC_QUANT"}},
  };
  return keys;
}

// Why an entry changes nothing for this config ("" when kiln acts on it).
std::string ignoredBecause(const ConverterConfig& config, const std::string& section,
                           const std::string& key) {
  for (const ActedKey& acted : actedKeys()) {
    if (section != acted.section || key != acted.key) continue;
    if (acted.quantTypes.empty()) return {};
    for (const char* type : acted.quantTypes)
      if (config.quantType == type) return {};
    // A common key under another quant type; a section of its own names the type it belongs to.
    if (!config.quantType.empty() && section == "common_quant_param")
      return fmt::format("quant_type={} does not read it", config.quantType);
    return fmt::format("no quant_type={} is set", fmt::join(acted.quantTypes, " or "));
  }
  return "kiln does not act on it";
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> splitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream stream(s);
  std::string item;
  while (std::getline(stream, item, sep))
    if (!trim(item).empty()) out.push_back(trim(item));
  return out;
}

// The closest of `names` to `name`, or "" when none is close.
std::string closest(const std::string& name, const std::vector<std::string>& names) {
  std::string best;
  size_t bestDistance = std::max<size_t>(3, name.size() / 3) + 1;
  for (const std::string& candidate : names) {
    size_t d = editDistance(name, candidate);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best;
}

class Parser {
 public:
  explicit Parser(std::string displayName) : file_(std::move(displayName)) {}

  Status invalid(int line, const std::string& message, const std::string& hint) const {
    return Status(ErrorCode::ConverterConfigInvalid,
                  fmt::format("{}:{}: INPUT ILLEGAL: {}", file_, line, message), hint)
        .withPeerCode("-600");
  }
  Status unsupported(int line, const std::string& message, const std::string& hint) const {
    return Status(ErrorCode::ConverterConfigInvalid, fmt::format("{}:{}: {}", file_, line, message),
                  hint)
        .withPeerCode("-7");
  }

  Status checkValue(const SectionSpec& section, const KeySpec& spec, const std::string& value,
                    int line) const {
    std::string where = fmt::format("[{}] {}={}", section.name, spec.key, value);
    auto lower = value;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    switch (spec.kind) {
    case Kind::String:
    case Kind::List:
      return Status::ok();
    case Kind::Bool:
      if (lower == "true" || lower == "false") return Status::ok();
      return invalid(line, fmt::format("{}: {} must be true or false", where, spec.key),
                     fmt::format("write {}=true or {}=false", spec.key, spec.key));
    case Kind::OnOff:
      if (value == "on" || value == "off") return Status::ok();
      return invalid(line, fmt::format("{}: {} must be on or off", where, spec.key),
                     fmt::format("write {}=on or {}=off", spec.key, spec.key));
    case Kind::Enum:
      if (std::find_if(spec.values.begin(), spec.values.end(),
                       [&](const char* v) { return value == v; }) != spec.values.end())
        return Status::ok();
      return invalid(line,
                     fmt::format("{}: {} must be {}", where, spec.key, fmt::join(spec.values, "|")),
                     fmt::format("use one of {} (upper case)", fmt::join(spec.values, ", ")));
    case Kind::Int: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size())
        return invalid(
            line, fmt::format("{}: {} must be an integer", where, spec.key),
            fmt::format("write {} as an integer in [{}, {}]", spec.key, spec.lo, spec.hi));
      if (static_cast<double>(v) < spec.lo || static_cast<double>(v) > spec.hi)
        return invalid(
            line, fmt::format("{}: {} should be in [{}, {}]", where, spec.key, spec.lo, spec.hi),
            fmt::format("set {} between {} and {}", spec.key, spec.lo, spec.hi));
      return Status::ok();
    }
    case Kind::Double: {
      double v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      bool inRange = spec.openRange ? (v > spec.lo && v < spec.hi) : (v >= spec.lo && v <= spec.hi);
      if (ec != std::errc() || end != value.data() + value.size() || !inRange) {
        if (spec.lo < -1e299)
          return invalid(line, fmt::format("{}: {} must be a number", where, spec.key),
                         fmt::format("write {} as a decimal number", spec.key));
        return invalid(line,
                       fmt::format("{}: {} must be a number in {}{}, {}{}", where, spec.key,
                                   spec.openRange ? "(" : "[", spec.lo, spec.hi,
                                   spec.openRange ? ")" : "]"),
                       fmt::format("set {} to a number in that range", spec.key));
      }
      return Status::ok();
    }
    }
    return Status::ok();
  }

  Expected<ConverterConfig> parse(const std::string& text) {
    ConverterConfig config;
    config.path = file_;
    std::vector<std::string> knownSections;
    for (const auto& s : sectionSpecs())
      knownSections.push_back(s.name);
    const SectionSpec* section = nullptr;
    std::istringstream stream(text);
    std::string raw;
    int line = 0;
    while (std::getline(stream, raw)) {
      ++line;
      std::string content = trim(raw);
      if (content.empty() || content[0] == '#' || content[0] == ';') continue;
      if (content.front() == '[') {
        if (content.back() != ']')
          return invalid(line, fmt::format("'{}' opens a section but has no closing ']'", content),
                         "write a section line as [common_quant_param]");
        std::string name = trim(content.substr(1, content.size() - 2));
        auto it = std::find_if(sectionSpecs().begin(), sectionSpecs().end(),
                               [&](const SectionSpec& s) { return name == s.name; });
        if (it == sectionSpecs().end()) {
          if (name == "model_param")
            return unsupported(line,
                               "[model_param]: multi-model conversion from a config file is not "
                               "supported by kiln's converter_lite",
                               "convert each model with its own --modelFile/--outputFile");
          std::string near = closest(name, knownSections);
          return invalid(line, fmt::format("section [{}] is not supported", name),
                         near.empty()
                             ? fmt::format("known sections: {}", fmt::join(knownSections, ", "))
                             : fmt::format("did you mean [{}]? known sections: {}", near,
                                           fmt::join(knownSections, ", ")));
        }
        section = &*it;
        config.sections[section->name]; // an empty section is still recorded
        continue;
      }
      size_t eq = content.find('=');
      if (eq == std::string::npos)
        return invalid(line, fmt::format("'{}' is neither [section] nor key=value", content),
                       "write one key=value per line, e.g. quant_type=WEIGHT_QUANT");
      std::string key = trim(content.substr(0, eq)), value = trim(content.substr(eq + 1));
      if (key.empty())
        return invalid(line, fmt::format("'{}' has no key before '='", content),
                       "write key=value, e.g. bit_num=8");
      if (!section)
        return invalid(line, fmt::format("`{}` appears before any [section]", key),
                       "put it under its section, e.g. [common_quant_param]");
      const KeySpec* spec = nullptr;
      for (const KeySpec& k : section->keys)
        if (key == k.key) spec = &k;
      if (!spec && !section->anyKey) {
        std::vector<std::string> keys;
        for (const KeySpec& k : section->keys)
          keys.push_back(k.key);
        std::string near = closest(key, keys);
        return invalid(line, fmt::format("`{}` is not supported in [{}]", key, section->name),
                       fmt::format("{}keys of [{}]: {}",
                                   near.empty() ? "" : "did you mean `" + near + "`? ",
                                   section->name, fmt::join(keys, ", ")));
      }
      auto& entries = config.sections[section->name];
      if (auto previous = entries.find(key); previous != entries.end())
        return invalid(line,
                       fmt::format("`{}` in [{}] is given twice (first on line {})", key,
                                   section->name, previous->second.line),
                       "keep one of the two lines");
      if (value.empty())
        return invalid(line, fmt::format("`{}` in [{}] has no value", key, section->name),
                       "write a value after '=' or remove the line");
      if (spec) KILN_TRY(checkValue(*section, *spec, value, line));
      entries[key] = ConfigEntry{value, line};
    }
    KILN_TRY(fill(config));
    return config;
  }

 private:
  static bool boolOf(const std::string& v) {
    return v.size() == 4 && std::tolower(static_cast<unsigned char>(v[0])) == 't';
  }

  // FULL_QUANT's calibration set: `calibrate_path=in1:/dir1,in2:/dir2`, one folder per graph
  // input (the name before the first ':').
  Status fillFullQuant(ConverterConfig& config, int quantTypeLine) const {
    const auto section = config.sections.find("data_preprocess_param");
    const ConfigEntry* path = nullptr;
    if (section != config.sections.end()) {
      auto found = section->second.find("calibrate_path");
      if (found != section->second.end()) path = &found->second;
    }
    if (!path)
      return invalid(quantTypeLine,
                     "[common_quant_param] quant_type=FULL_QUANT needs calibration data: "
                     "[data_preprocess_param] calibrate_path is not set",
                     "add [data_preprocess_param] with calibrate_path=INPUT_NAME:/folder/of/"
                     "samples (one folder per model input) and input_type=BIN");
    for (const std::string& item : splitList(path->value, ',')) {
      const size_t colon = item.find(':');
      const std::string name = colon == std::string::npos ? "" : trim(item.substr(0, colon));
      const std::string folder = colon == std::string::npos ? "" : trim(item.substr(colon + 1));
      if (name.empty() || folder.empty())
        return invalid(path->line,
                       fmt::format("[data_preprocess_param] calibrate_path: '{}' is not "
                                   "INPUT_NAME:FOLDER",
                                   item),
                       "write calibrate_path=input_1:/data/input_1,input_2:/data/input_2");
      if (!config.calibratePath.emplace(name, folder).second)
        return invalid(path->line,
                       fmt::format("[data_preprocess_param] calibrate_path names input '{}' "
                                   "twice",
                                   name),
                       "give each model input one folder");
    }
    if (config.calibratePath.empty())
      return invalid(path->line, "[data_preprocess_param] calibrate_path is empty",
                     "write calibrate_path=INPUT_NAME:/folder/of/samples");
    auto value = [&](const char* key) -> const ConfigEntry* {
      if (section == config.sections.end()) return nullptr;
      auto found = section->second.find(key);
      return found == section->second.end() ? nullptr : &found->second;
    };
    if (auto* e = value("image_to_format")) config.image.toFormat = e->value;
    if (auto* e = value("resize_method")) config.image.resizeMethod = e->value;
    for (auto [key, field] : {std::pair{"resize_width", &config.image.resizeWidth},
                              std::pair{"resize_height", &config.image.resizeHeight},
                              std::pair{"center_crop_width", &config.image.cropWidth},
                              std::pair{"center_crop_height", &config.image.cropHeight}})
      if (auto* e = value(key)) *field = std::stoi(e->value);
    for (auto [key, field] : {std::pair{"normalize_mean", &config.image.mean},
                              std::pair{"normalize_std", &config.image.std}}) {
      const ConfigEntry* e = value(key);
      if (!e) continue;
      std::string list = trim(e->value);
      if (list.size() < 2 || list.front() != '[' || list.back() != ']')
        return invalid(e->line,
                       fmt::format("[data_preprocess_param] {}={}: write the values in brackets",
                                   key, e->value),
                       fmt::format("write {}=[v1, v2, v3], one value per channel", key));
      for (const std::string& item : splitList(list.substr(1, list.size() - 2), ',')) {
        float v = 0;
        auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (ec != std::errc() || end != item.data() + item.size() || !std::isfinite(v) ||
            (key == std::string("normalize_std") && v == 0))
          return invalid(e->line,
                         fmt::format("[data_preprocess_param] {}: '{}' is not a {}number", key,
                                     item, key == std::string("normalize_std") ? "non-zero " : ""),
                         fmt::format("write {}=[v1, v2, v3] with decimal numbers", key));
        field->push_back(v);
      }
    }
    if ((value("resize_width") != nullptr) != (value("resize_height") != nullptr))
      return invalid((value("resize_width") ? value("resize_width") : value("resize_height"))->line,
                     "[data_preprocess_param] needs both resize_width and resize_height",
                     "give both, or neither to keep each image's size");
    if ((value("center_crop_width") != nullptr) != (value("center_crop_height") != nullptr))
      return invalid(
          (value("center_crop_width") ? value("center_crop_width") : value("center_crop_height"))
              ->line,
          "[data_preprocess_param] needs both center_crop_width and center_crop_height",
          "give both, or neither");
    return Status::ok();
  }

  // Typed fields and the cross-key rules, after every line has been checked on its own.
  Status fill(ConverterConfig& config) const {
    auto entry = [&](const char* section, const char* key) -> const ConfigEntry* {
      auto s = config.sections.find(section);
      if (s == config.sections.end()) return nullptr;
      auto k = s->second.find(key);
      return k == s->second.end() ? nullptr : &k->second;
    };
    if (auto* e = entry("common_quant_param", "quant_type")) config.quantType = e->value;
    if (auto* e = entry("common_quant_param", "bit_num")) config.bitNum = std::stoi(e->value);
    if (auto* e = entry("common_quant_param", "min_quant_weight_size"))
      config.minQuantWeightSize = std::stoull(e->value);
    if (auto* e = entry("common_quant_param", "min_quant_weight_channel"))
      config.minQuantWeightChannel = std::stoll(e->value);
    if (auto* e = entry("common_quant_param", "skip_quant_node"))
      config.skipQuantNode = splitList(e->value, ',');
    if (auto* e = entry("common_quant_param", "enable_encode"))
      config.enableEncode = boolOf(e->value);
    if (auto* e = entry("weight_quant_param", "per_channel")) config.perChannel = boolOf(e->value);
    if (auto* e = entry("weight_quant_param", "bias_correction"))
      config.biasCorrection = boolOf(e->value);
    if (auto* e = entry("weight_quant_param", "dequant_strategy"))
      config.dequantStrategy = e->value;
    if (auto* e = entry("weight_quant_param", "quant_strategy")) config.quantStrategy = e->value;
    if (auto* e = entry("dynamic_quant_param", "quant_strategy"))
      config.dynamicQuantStrategy = e->value;
    if (auto* e = entry("registry", "disable_fusion")) config.disableFusion = e->value == "on";
    if (auto* e = entry("registry", "fusion_blacklists"))
      config.fusionBlacklists = splitList(e->value, ',');
    if (auto* e = entry("registry", "plugin_path")) config.pluginPaths = splitList(e->value, ';');

    if (auto* e = entry("data_preprocess_param", "calibrate_size"))
      config.calibrateSize = std::stoull(e->value);
    if (auto* e = entry("data_preprocess_param", "input_type"))
      config.calibrateInputType = e->value;
    if (auto* e = entry("full_quant_param", "activation_quant_method"))
      config.activationQuantMethod = e->value;
    if (auto* e = entry("full_quant_param", "per_channel"))
      config.fullQuantPerChannel = boolOf(e->value);
    if (auto* e = entry("full_quant_param", "bias_correction"))
      config.fullQuantBiasCorrection = boolOf(e->value);
    if (auto* e = entry("full_quant_param", "kiln_equalize_channels"))
      config.equalizeChannels = boolOf(e->value);
    if (auto* e = entry("full_quant_param", "kiln_target_cosine"))
      config.targetCosine = std::stod(e->value);

    const ConfigEntry* quantType = entry("common_quant_param", "quant_type");
    const ConfigEntry* bitNum = entry("common_quant_param", "bit_num");
    if (quantType && config.quantType != "WEIGHT_QUANT" && bitNum && config.bitNum != 8)
      return invalid(bitNum->line,
                     fmt::format("[common_quant_param] bit_num={}: {} takes bit_num=8 only",
                                 config.bitNum, config.quantType),
                     "set bit_num=8 or remove it");
    if (config.quantType == "FULL_QUANT") KILN_TRY(fillFullQuant(config, quantType->line));
    if (config.quantType == "WEIGHT_QUANT") {
      int line = bitNum ? bitNum->line : quantType->line;
      if (config.bitNum == 0)
        return unsupported(line,
                           "[common_quant_param] bit_num=0 (mixed-bit search with FSE coding) is "
                           "not supported by kiln's converter_lite",
                           "set bit_num between 1 and 16 (8 is the usual choice)");
      const ConfigEntry* encode = entry("common_quant_param", "enable_encode");
      if (config.bitNum != 8 && config.bitNum != 16 && !config.enableEncode)
        return invalid(encode->line,
                       fmt::format("[common_quant_param] enable_encode=false: bit_num={} needs "
                                   "enable_encode=true (values must be bit-packed)",
                                   config.bitNum),
                       "set enable_encode=true, or use bit_num=8 or 16");
      if (const ConfigEntry* e = entry("weight_quant_param", "quant_strategy");
          e && config.quantStrategy == "GPTQ")
        return unsupported(e->line,
                           "[weight_quant_param] quant_strategy=GPTQ is not supported by kiln's "
                           "converter_lite",
                           "use quant_strategy=MAX_MIN (the default)");
      if (const ConfigEntry* e = entry("weight_quant_param", "dequant_strategy");
          e && config.dequantStrategy == "ON_THE_FLY")
        return unsupported(e->line,
                           "[weight_quant_param] dequant_strategy=ON_THE_FLY (Ascend) is not "
                           "supported by kiln's converter_lite",
                           "remove the key (DEFAULT dequantizes at load time on the CPU)");
      if (const ConfigEntry* e = entry("weight_quant_param", "per_channel");
          e && !config.perChannel)
        return unsupported(e->line,
                           "[weight_quant_param] per_channel=false (per-layer weight quant) is not "
                           "supported by kiln's converter_lite",
                           "remove the key (per-channel is the default)");
    }
    if (const ConfigEntry* e = entry("registry", "plugin_path"); e && !config.pluginPaths.empty())
      return unsupported(
          e->line,
          "[registry] plugin_path: loading converter plugins is not supported by kiln's "
          "converter_lite",
          "remove plugin_path; kiln converts ONNX ops it knows natively");
    const bool hasArch = entry("cpu_option_cfg_param", "architecture") != nullptr;
    const bool hasInstruction = entry("cpu_option_cfg_param", "instruction") != nullptr;
    if (hasArch != hasInstruction) {
      const ConfigEntry* e = hasArch ? entry("cpu_option_cfg_param", "architecture")
                                     : entry("cpu_option_cfg_param", "instruction");
      return invalid(e->line, "[cpu_option_cfg_param] needs both architecture and instruction",
                     "write architecture=ARM64 and instruction=SIMD_DOT, or neither");
    }
    return Status::ok();
  }

  std::string file_;
};

} // namespace

bool ConverterConfig::has(const std::string& section, const std::string& key) const {
  auto s = sections.find(section);
  return s != sections.end() && s->second.count(key);
}

Expected<ConverterConfig> parseConverterConfigText(const std::string& text,
                                                   const std::string& displayName) {
  return Parser(displayName).parse(text);
}

Expected<ConverterConfig> parseConverterConfigFile(const std::string& path) {
  auto text = readInputFile(path);
  if (!text && text.status().code() == ErrorCode::FileNotFound)
    return Status(ErrorCode::FileNotFound,
                  fmt::format("--configFile={}: the config file cannot be opened", path),
                  "check the path passed to --configFile")
        .withPeerCode("-600");
  if (!text) return text.status().withContext("--configFile").withPeerCode("-600");
  return parseConverterConfigText(*text, path);
}

bool weightQuantOptionsFor(const ConverterConfig& config, WeightQuantOptions& options) {
  if (config.quantType != "WEIGHT_QUANT") return false;
  options = WeightQuantOptions{};
  options.bitNum = config.bitNum;
  options.symmetric = false; // converter_lite's CPU weight quant is asymmetric
  options.minQuantWeightSize = config.minQuantWeightSize;
  options.minQuantWeightChannel = config.minQuantWeightChannel;
  options.skipNodes = config.skipQuantNode;
  options.biasCorrection = config.biasCorrection;
  return true;
}

bool dynamicQuantOptionsFor(const ConverterConfig& config, WeightQuantOptions& options,
                            bool& activationPerRow) {
  if (config.quantType != "DYNAMIC_QUANT") return false;
  options = WeightQuantOptions{};
  options.bitNum = 8;
  options.symmetric = true; // the dynamic int8 kernel applies one weight zero point: 0
  activationPerRow = config.dynamicQuantStrategy == "ACWL";
  options.perChannel = !activationPerRow;
  // converter_lite's dynamic quantizer drops the size filters and corrects no bias (the int8
  // kernel reads scale and zero point only).
  options.minQuantWeightSize = 0;
  options.minQuantWeightChannel = 0;
  options.biasCorrection = false;
  options.skipNodes = config.skipQuantNode;
  options.ops = {"MatMul", "Gemm", "Gather"}; // Gather tables: 8-bit weights dequantized at load
  return true;
}

std::vector<std::string> ignoredConfigNotes(const ConverterConfig& config) {
  std::vector<std::string> notes;
  for (const auto& [section, entries] : config.sections)
    for (const auto& [key, entry] : entries) {
      const std::string why = ignoredBecause(config, section, key);
      if (why.empty()) continue;
      notes.push_back(fmt::format("{}:{}: [{}] {}={} is accepted but ignored ({})", config.path,
                                  entry.line, section, key, entry.value, why));
    }
  return notes;
}

std::string withSkipQuantNodes(const std::string& text, const std::vector<std::string>& skip,
                               int bitNum) {
  std::string joined;
  for (const auto& s : skip)
    joined += (joined.empty() ? "" : ",") + s;
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::string line;
  bool inSection = false, found = false, hasType = false, hasBits = false;
  size_t insertAt = 0;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (!t.empty() && t.front() == '[') {
      inSection = t == "[common_quant_param]";
      if (inSection) {
        found = true;
        insertAt = lines.size() + 1;
      }
    } else if (inSection) {
      std::string key = trim(t.substr(0, t.find('=')));
      if (key == "skip_quant_node") continue; // replaced below
      hasType |= key == "quant_type";
      hasBits |= key == "bit_num";
    }
    lines.push_back(line);
  }
  std::vector<std::string> added;
  if (!found) {
    if (!lines.empty() && !trim(lines.back()).empty()) lines.push_back("");
    lines.push_back("[common_quant_param]");
    insertAt = lines.size();
  }
  if (!hasType) added.push_back("quant_type=WEIGHT_QUANT");
  if (!hasBits) added.push_back(fmt::format("bit_num={}", bitNum));
  if (!joined.empty()) added.push_back("skip_quant_node=" + joined);
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(insertAt), added.begin(), added.end());
  std::string out;
  for (const auto& l : lines)
    out += l + "\n";
  return out;
}

} // namespace kiln
