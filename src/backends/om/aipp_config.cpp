// AIPP configuration (--insert_op_conf): protobuf text parsing, model-free validation and defaults.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "kiln/backends/aipp.h"
#include "kiln/support/input_file.h"
#include "kiln_proto/insert_op.pb.h"

namespace kiln {
namespace {

namespace pb = google::protobuf;
using TextParser = pb::TextFormat::Parser;

// Keeps the first error protobuf reports (the later ones follow from it).
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!has_) {
      has_ = true;
      line_ = line;
      column_ = column;
      message_ = message;
    }
  }
  bool has_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

const char* const kInputFormatNames[] = {
    "UNDEFINED",    "YUV420SP_U8", "XRGB8888_U8", "RGB888_U8",   "YUV400_U8",  "NC1HWC0DI_FP16",
    "NC1HWC0DI_S8", "ARGB8888_U8", "YUYV_U8",     "YUV422SP_U8", "AYUV444_U8", "RAW10",
    "RAW12",        "RAW16",       "RAW24",       "RGB16",       "RGB20",      "RGB24",
    "RGB8_IR",      "RGB16_IR",    "RGB24_IR"};

// Builds the E10052-style error: "<file>:<line>: aipp_op N: AIPP configuration is invalid.
// Reason: <text>" — the reason text is ATC's where ATC has one.
Status invalid(const std::string& file, int line, size_t opIndex, const std::string& reason,
               const std::string& hint) {
  return Status(ErrorCode::AippConfigInvalid,
                fmt::format("{}:{}: aipp_op {}: AIPP configuration is invalid. Reason: {}", file,
                            line, opIndex, reason),
                hint)
      .withPeerCode("E10052");
}

// Reads one AippOpParams with the locations protobuf recorded, checks it and fills defaults.
class OpReader {
 public:
  OpReader(const domi::AippOpParams& params, const pb::TextFormat::ParseInfoTree* tree,
           const std::string& file, size_t index, int blockLine)
      : p_(params), tree_(tree), file_(file), index_(index), blockLine_(blockLine) {}

  Expected<AippOp> read() {
    AippOp op;
    op.line = blockLine_;
    op.mode = static_cast<AippMode>(p_.aipp_mode());
    if (op.mode != AippMode::Static && op.mode != AippMode::Dynamic)
      return fail("aipp_mode",
                  "When insert AIPP op, aipp_mode must be configured as static or dynamic",
                  "write 'aipp_mode: static' (or dynamic) in the aipp_op block");

    // Repeated fields stand for optional scalars: more than one value is an error.
    for (const char* name :
         {"var_reci_chn_0", "var_reci_chn_1", "var_reci_chn_2", "var_reci_chn_3", "matrix_r0c0",
          "matrix_r0c1", "matrix_r0c2", "matrix_r1c0", "matrix_r1c1", "matrix_r1c2", "matrix_r2c0",
          "matrix_r2c1", "matrix_r2c2", "output_bias_0", "output_bias_1", "output_bias_2",
          "input_bias_0", "input_bias_1", "input_bias_2"}) {
      const pb::FieldDescriptor* field = p_.GetDescriptor()->FindFieldByName(name);
      if (p_.GetReflection()->FieldSize(p_, field) > 1)
        return fail(name, fmt::format("The parameter {} cannot be configured repeatedly", name),
                    fmt::format("give {} once", name));
    }

    if (op.mode == AippMode::Dynamic && p_.max_src_image_size() == 0)
      return fail("max_src_image_size",
                  "For dynamic AIPP params, max_src_image_size must be set which number should be "
                  "greater than 0",
                  "set max_src_image_size to the byte size of the largest source image");
    if (op.mode == AippMode::Static && p_.input_format() == domi::AippOpParams::UNDEFINED)
      return fail("input_format", "Input format of AIPP conf must be set in static aipp",
                  "set input_format to YUV420SP_U8, XRGB8888_U8, RGB888_U8 or YUV400_U8");

    struct Signed {
      const char* field;
      const char* label;
      int32_t value;
    };
    // ATC's list names crop_size_w but not crop_size_h; kiln checks both with the same wording.
    for (const Signed& s :
         {Signed{"src_image_size_w", "Src_image_size_w", p_.src_image_size_w()},
          Signed{"src_image_size_h", "Src_image_size_h", p_.src_image_size_h()},
          Signed{"load_start_pos_w", "Load_start_pos_w", p_.load_start_pos_w()},
          Signed{"load_start_pos_h", "Load_start_pos_h", p_.load_start_pos_h()},
          Signed{"crop_size_w", "Crop_size_w", p_.crop_size_w()},
          Signed{"crop_size_h", "Crop_size_h", p_.crop_size_h()},
          Signed{"resize_output_w", "Resize_output_w", p_.resize_output_w()},
          Signed{"resize_output_h", "Resize_output_h", p_.resize_output_h()},
          Signed{"left_padding_size", "Left_padding_size", p_.left_padding_size()},
          Signed{"right_padding_size", "Right_padding_size", p_.right_padding_size()},
          Signed{"top_padding_size", "Top_padding_size", p_.top_padding_size()},
          Signed{"bottom_padding_size", "Bottom_padding_size", p_.bottom_padding_size()}})
      if (s.value < 0)
        return fail(s.field, fmt::format("{} must not be configured smaller than 0", s.label),
                    fmt::format("set {} to 0 or more", s.field));

    if (p_.related_input_name().size() > 0 && present("related_input_rank"))
      return fail("related_input_name",
                  "related_input_rank and related_input_name cannot be set at the same time",
                  "name the input either by rank or by name");

    op.relatedInputRank = p_.related_input_rank();
    op.relatedInputRankSet = present("related_input_rank");
    op.relatedInputName = p_.related_input_name();
    op.inputEdgeIdx.assign(p_.input_edge_idx().begin(), p_.input_edge_idx().end());
    op.maxSrcImageSize = p_.max_src_image_size();
    op.supportRotation = p_.support_rotation();
    op.inputFormat = p_.input_format();
    op.cscSwitch = p_.csc_switch();
    op.rbuvSwapSwitch = p_.rbuv_swap_switch();
    op.axSwapSwitch = p_.ax_swap_switch();
    op.singleLineMode = p_.single_line_mode();
    op.srcImageSizeW = p_.src_image_size_w();
    op.srcImageSizeH = p_.src_image_size_h();
    op.crop = p_.crop();
    if (op.crop) {
      op.loadStartPosW = p_.load_start_pos_w();
      op.loadStartPosH = p_.load_start_pos_h();
      op.cropSizeW = p_.crop_size_w();
      op.cropSizeH = p_.crop_size_h();
    }
    op.resize = p_.resize();
    op.resizeSet = p_.resize();
    if (op.resize) {
      op.resizeOutputW = p_.resize_output_w();
      op.resizeOutputH = p_.resize_output_h();
    }
    op.padding = p_.padding();
    if (op.padding) {
      op.leftPaddingSize = p_.left_padding_size();
      op.rightPaddingSize = p_.right_padding_size();
      op.topPaddingSize = p_.top_padding_size();
      op.bottomPaddingSize = p_.bottom_padding_size();
    }
    op.paddingValue = p_.padding_value();
    op.meanChn = {p_.mean_chn_0(), p_.mean_chn_1(), p_.mean_chn_2(), p_.mean_chn_3()};
    op.minChn = {p_.min_chn_0(), p_.min_chn_1(), p_.min_chn_2(), p_.min_chn_3()};
    auto firstOr = [](const auto& repeated, auto fallback) {
      return repeated.empty() ? fallback : *repeated.begin();
    };
    op.varReciChn = {firstOr(p_.var_reci_chn_0(), 1.0f), firstOr(p_.var_reci_chn_1(), 1.0f),
                     firstOr(p_.var_reci_chn_2(), 1.0f), firstOr(p_.var_reci_chn_3(), 1.0f)};

    // §6.4: with CSC in static mode, unset matrix elements take the defaults for the format.
    static constexpr int32_t kYuvToBgr[3][3] = {{298, 516, 0}, {298, -100, -208}, {298, 0, 409}};
    static constexpr int32_t kRgbToYuv[3][3] = {{66, 129, 25}, {-38, -74, 112}, {112, -94, -18}};
    const auto& defaults =
        p_.input_format() == domi::AippOpParams::YUV420SP_U8 ? kYuvToBgr : kRgbToYuv;
    const bool fillMatrix = op.mode == AippMode::Static && op.cscSwitch;
    const pb::RepeatedField<int32_t>* matrix[3][3] = {
        {&p_.matrix_r0c0(), &p_.matrix_r0c1(), &p_.matrix_r0c2()},
        {&p_.matrix_r1c0(), &p_.matrix_r1c1(), &p_.matrix_r1c2()},
        {&p_.matrix_r2c0(), &p_.matrix_r2c1(), &p_.matrix_r2c2()}};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c)
        op.matrix[r][c] = firstOr(*matrix[r][c], fillMatrix ? defaults[r][c] : 0);
    op.outputBias = {firstOr(p_.output_bias_0(), 16), firstOr(p_.output_bias_1(), 128),
                     firstOr(p_.output_bias_2(), 128)};
    op.inputBias = {firstOr(p_.input_bias_0(), 16), firstOr(p_.input_bias_1(), 128),
                    firstOr(p_.input_bias_2(), 128)};
    KILN_TRY(checkDocumentedRanges(op));
    return op;
  }

 private:
  bool present(const char* name) const {
    const pb::FieldDescriptor* field = p_.GetDescriptor()->FindFieldByName(name);
    if (!tree_ || !field) return false;
    return tree_->GetLocation(field, field->is_repeated() ? 0 : -1).line >= 0;
  }
  // Line of the field if written, else of the block.
  int lineOf(const char* name) const {
    const pb::FieldDescriptor* field = p_.GetDescriptor()->FindFieldByName(name);
    if (tree_ && field) {
      int count = field->is_repeated() ? p_.GetReflection()->FieldSize(p_, field) : 1;
      // For a repeated field given twice, point at the second occurrence.
      int index = field->is_repeated() ? std::max(0, std::min(count - 1, 1)) : -1;
      int line = tree_->GetLocation(field, index).line;
      if (line >= 0) return line + 1;
    }
    return blockLine_;
  }
  Status fail(const char* field, const std::string& reason, const std::string& hint) const {
    return invalid(file_, lineOf(field), index_, reason, hint);
  }

  // Ranges and formats the documentation gives (§6.2). ATC itself leaves most of them to later
  // stages; kiln checks them here because the preprocessing graph it builds depends on them.
  Status checkDocumentedRanges(const AippOp& op) const {
    if (op.mode == AippMode::Static) {
      const int f = op.inputFormat;
      if (f != 1 && f != 2 && f != 3 && f != 4)
        return fail("input_format",
                    fmt::format("input_format {} is not supported; the supported formats are "
                                "YUV420SP_U8, XRGB8888_U8, RGB888_U8 and YUV400_U8",
                                aippInputFormatName(f)),
                    "convert the images to one of the supported formats");
    }
    if (op.srcImageSizeW != 0 && (op.srcImageSizeW < 2 || op.srcImageSizeW > 4096))
      return fail("src_image_size_w",
                  fmt::format("src_image_size_w {} is out of range [2,4096]", op.srcImageSizeW),
                  "use a width in [2,4096], or 0 for the model input width");
    if (op.srcImageSizeH != 0 && (op.srcImageSizeH < 1 || op.srcImageSizeH > 4096))
      return fail("src_image_size_h",
                  fmt::format("src_image_size_h {} is out of range [1,4096]", op.srcImageSizeH),
                  "use a height in [1,4096], or 0 for the model input height");
    const bool yuv420 = op.inputFormat == static_cast<int>(AippInputFormat::Yuv420spU8);
    if (yuv420 && op.mode == AippMode::Static) {
      if (op.srcImageSizeW % 2 != 0 || op.srcImageSizeH % 2 != 0)
        return fail(op.srcImageSizeW % 2 ? "src_image_size_w" : "src_image_size_h",
                    fmt::format("src_image_size_w and src_image_size_h must be even for "
                                "YUV420SP_U8 (got {}x{})",
                                op.srcImageSizeW, op.srcImageSizeH),
                    "use an even image width and height");
      if (op.loadStartPosW % 2 != 0 || op.loadStartPosH % 2 != 0)
        return fail(op.loadStartPosW % 2 ? "load_start_pos_w" : "load_start_pos_h",
                    fmt::format("load_start_pos_w and load_start_pos_h must be even for "
                                "YUV420SP_U8 (got {},{})",
                                op.loadStartPosW, op.loadStartPosH),
                    "start the crop on an even column and row");
    }
    if (op.crop) {
      if (op.loadStartPosW > 4095 || op.loadStartPosH > 4095)
        return fail(op.loadStartPosW > 4095 ? "load_start_pos_w" : "load_start_pos_h",
                    "load_start_pos_w and load_start_pos_h must be in [0,4095]",
                    "start the crop inside the image");
      if (op.cropSizeW > 4096 || op.cropSizeH > 4096)
        return fail(op.cropSizeW > 4096 ? "crop_size_w" : "crop_size_h",
                    "crop_size_w and crop_size_h must be in [0,4096]", "crop a smaller window");
      if (op.srcImageSizeW > 0 && op.loadStartPosW + op.cropSizeW > op.srcImageSizeW)
        return fail("crop_size_w",
                    fmt::format("load_start_pos_w + crop_size_w ({} + {}) exceeds "
                                "src_image_size_w {}",
                                op.loadStartPosW, op.cropSizeW, op.srcImageSizeW),
                    "keep the crop window inside the source image");
      if (op.srcImageSizeH > 0 && op.loadStartPosH + op.cropSizeH > op.srcImageSizeH)
        return fail("crop_size_h",
                    fmt::format("load_start_pos_h + crop_size_h ({} + {}) exceeds "
                                "src_image_size_h {}",
                                op.loadStartPosH, op.cropSizeH, op.srcImageSizeH),
                    "keep the crop window inside the source image");
    }
    if (op.padding) {
      struct Pad {
        const char* field;
        int32_t value;
      };
      for (const Pad& pad : {Pad{"left_padding_size", op.leftPaddingSize},
                             Pad{"right_padding_size", op.rightPaddingSize},
                             Pad{"top_padding_size", op.topPaddingSize},
                             Pad{"bottom_padding_size", op.bottomPaddingSize}})
        if (pad.value > 32)
          return fail(pad.field, fmt::format("{} {} is out of range [0,32]", pad.field, pad.value),
                      "pad by at most 32 pixels per side");
    }
    static const char* const kMatrixNames[3][3] = {{"matrix_r0c0", "matrix_r0c1", "matrix_r0c2"},
                                                   {"matrix_r1c0", "matrix_r1c1", "matrix_r1c2"},
                                                   {"matrix_r2c0", "matrix_r2c1", "matrix_r2c2"}};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c)
        if (op.matrix[r][c] < -32768 || op.matrix[r][c] > 32767)
          return fail(kMatrixNames[r][c],
                      fmt::format("{} {} is outside the int16 range [-32768,32767]",
                                  kMatrixNames[r][c], op.matrix[r][c]),
                      "scale the matrix to fit int16");
    static const char* const kBiasNames[2][3] = {
        {"input_bias_0", "input_bias_1", "input_bias_2"},
        {"output_bias_0", "output_bias_1", "output_bias_2"}};
    for (int i = 0; i < 3; ++i) {
      if (op.inputBias[i] < 0 || op.inputBias[i] > 255)
        return fail(kBiasNames[0][i],
                    fmt::format("{} {} is outside the uint8 range [0,255]", kBiasNames[0][i],
                                op.inputBias[i]),
                    "use a bias in [0,255]");
      if (op.outputBias[i] < 0 || op.outputBias[i] > 255)
        return fail(kBiasNames[1][i],
                    fmt::format("{} {} is outside the uint8 range [0,255]", kBiasNames[1][i],
                                op.outputBias[i]),
                    "use a bias in [0,255]");
    }
    static const char* const kMeanNames[4] = {"mean_chn_0", "mean_chn_1", "mean_chn_2",
                                              "mean_chn_3"};
    for (int i = 0; i < 4; ++i)
      if (op.meanChn[i] < 0 || op.meanChn[i] > 255)
        return fail(
            kMeanNames[i],
            fmt::format("{} {} is outside the uint8 range [0,255]", kMeanNames[i], op.meanChn[i]),
            "use a mean in [0,255]");
    return Status::ok();
  }

  const domi::AippOpParams& p_;
  const pb::TextFormat::ParseInfoTree* tree_;
  const std::string& file_;
  size_t index_;
  int blockLine_;
};

// protobuf reports a bad field value (an unknown enum name, a number out of range) at the token
// after it, often on the next line; point at the line holding the quoted value instead.
void locateValueError(const std::string& text, const std::string& message, int& line, int& column) {
  if (message.rfind("Unknown enumeration value", 0) != 0 &&
      message.rfind("Integer out of range", 0) != 0 && message.rfind("Invalid value", 0) != 0)
    return;
  size_t open = message.find('"');
  size_t close = open == std::string::npos ? open : message.find('"', open + 1);
  if (close == std::string::npos) return;
  const std::string value = message.substr(open + 1, close - open - 1);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  for (int i = std::min<int>(line, static_cast<int>(lines.size()) - 1); i >= 0; --i) {
    size_t at = lines[i].find(value);
    if (at != std::string::npos) {
      line = i;
      column = static_cast<int>(at);
      return;
    }
  }
}

} // namespace

std::string aippInputFormatName(int format) {
  if (format >= 0 && format <= 20) return kInputFormatNames[format];
  return std::to_string(format);
}

Expected<AippConfig> parseAippConfigText(const std::string& text, const std::string& displayName) {
  domi::InsertNewOps message;
  TextParser parser;
  FirstErrorCollector errors;
  pb::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(text, &message)) {
    // protobuf's lines and columns are 0-based.
    int line = errors.line_, column = errors.column_;
    locateValueError(text, errors.message_, line, column);
    std::string detail = errors.has_ ? errors.message_ : "not valid protobuf text";
    while (!detail.empty() && detail.back() == '.')
      detail.pop_back(); // toString adds ". Fix"
    return Status(ErrorCode::AippConfigSyntax,
                  fmt::format("{}:{}:{}: Failed to parse file {} through "
                              "google::protobuf::TextFormat::Parse: {}",
                              displayName, line + 1, column + 1, displayName, detail),
                  "correct that line; the file holds 'aipp_op { ... }' blocks of "
                  "domi.InsertNewOps in protobuf text format")
        .withPeerCode("E13018");
  }

  AippConfig config;
  config.path = displayName;
  config.text = text;
  const pb::FieldDescriptor* opField = message.GetDescriptor()->FindFieldByName("aipp_op");
  for (int i = 0; i < message.aipp_op_size(); ++i) {
    const pb::TextFormat::ParseInfoTree* nested = tree.GetTreeForNested(opField, i);
    int blockLine = tree.GetLocation(opField, i).line + 1;
    OpReader reader(message.aipp_op(i), nested, displayName, static_cast<size_t>(i), blockLine);
    KILN_ASSIGN_OR_RETURN(AippOp op, reader.read());
    config.ops.push_back(std::move(op));
  }
  const pb::FieldDescriptor* shapeField =
      message.GetDescriptor()->FindFieldByName("multi_shape_op");
  for (int i = 0; i < message.multi_shape_op_size(); ++i) {
    const domi::MultiShapeOpParams& m = message.multi_shape_op(i);
    AippMultiShapeOp op;
    op.line = tree.GetLocation(shapeField, i).line + 1;
    op.mode = m.mode();
    op.relatedInputRank = m.related_input_rank();
    op.batchList.assign(m.batch_list().begin(), m.batch_list().end());
    config.multiShapeOps.push_back(std::move(op));
  }
  return config;
}

Expected<AippConfig> parseAippConfigFile(const std::string& path) {
  auto text = readInputFile(path);
  if (!text && text.status().code() == ErrorCode::FileNotFound)
    return makeError(ErrorCode::FileNotFound, "check the --insert_op_conf path",
                     "cannot open AIPP configuration '{}': no such file", path);
  if (!text) return text.status().withContext("AIPP configuration");
  return parseAippConfigText(*text, path);
}

} // namespace kiln
