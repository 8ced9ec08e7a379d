// One parser for ATC and converter_lite input-shape strings, plus validation against a model.
#include "kiln/shape_spec.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {
namespace {

const char* kAtcSample = "\"input_name1:n1~n2,c1,h1,w1\"";
const char* kAtcHint = "The valid format is input_name1:n1,c1,h1,w1;input_name2:n2,c2,h2,w2. "
                       "Replace input_name with node names. "
                       "Ensure that the shape values are integers.";

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

Status atcSyntax(const std::string& value, const std::string& reason,
                 const char* sample = kAtcSample) {
  return Status(
             ErrorCode::ShapeSpecSyntax,
             fmt::format(
                 "Value {} for parameter --input_shape is invalid. Reason: {}. The value must be "
                 "formatted as {}.",
                 value, reason, sample),
             kAtcHint)
      .withPeerCode("E10002");
}

Status liteIllegal(const std::string& message) {
  return Status(
             ErrorCode::ShapeSpecSyntax, "INPUT ILLEGAL: " + message,
             "write --inputShape=\"name1:1,3,224,224;name2:1,10\" with non-negative integer dims")
      .withPeerCode("-600");
}

// Parses one integer; returns the ATC error for floats, letters and overflow.
Expected<int64_t> parseInt(const std::string& text, const std::string& entry,
                           ShapeDialect dialect) {
  std::string t = trim(text);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (!t.empty() && ec == std::errc() && end == t.data() + t.size()) return value;
  if (dialect == ShapeDialect::ConverterLite)
    return liteIllegal(fmt::format("'{}' in --inputShape is not an integer", t));
  if (ec == std::errc::result_out_of_range)
    return Status(ErrorCode::ShapeSpecBadDim,
                  fmt::format("Value {} for --input_shape is out of range.", t),
                  "Run the \"atc -h\" command to view the usage.")
        .withPeerCode("E10013");
  if (t.find('.') != std::string::npos)
    return atcSyntax(entry, "The float number is unsupported", "\"input_name1:1,3,224,224\"");
  return atcSyntax(entry, "It is not a digit", "\"input_name1:1,3,224,224\"");
}

Expected<DimSpec> parseDim(const std::string& text, const std::string& entry,
                           ShapeDialect dialect) {
  DimSpec dim;
  auto tilde = text.find('~');
  if (tilde != std::string::npos && dialect == ShapeDialect::Atc) {
    KILN_ASSIGN_OR_RETURN(dim.lo, parseInt(text.substr(0, tilde), entry, dialect));
    KILN_ASSIGN_OR_RETURN(dim.hi, parseInt(text.substr(tilde + 1), entry, dialect));
    dim.ranged = true;
    if (dim.lo < 0 || (dim.hi != -1 && dim.hi < dim.lo))
      return atcSyntax(entry,
                       fmt::format("The range {} must satisfy 0 <= min <= max (max -1 = unbounded)",
                                   trim(text)));
    return dim;
  }
  KILN_ASSIGN_OR_RETURN(int64_t v, parseInt(text, entry, dialect));
  if (v == -1 && dialect == ShapeDialect::Atc) {
    dim.lo = 0;
    dim.hi = -1;
    return dim;
  }
  if (dialect == ShapeDialect::ConverterLite && v < 0) return liteIllegal("Unsupported dim < 0.");
  if (dialect == ShapeDialect::Atc && v <= 0)
    return Status(
               ErrorCode::ShapeSpecBadDim,
               fmt::format(
                   "Value {} for parameter --input_shape is invalid. Shape values must be positive "
                   "integers. The error value in the shape is {}.",
                   entry, v),
               "Use positive values for static shapes; -1 or a~b needs a dynamic option")
        .withPeerCode("E10011");
  dim.lo = dim.hi = v;
  return dim;
}

} // namespace

std::string DimSpec::toString() const {
  if (ranged) return fmt::format("{}~{}", lo, hi);
  if (hi == -1) return "-1";
  return std::to_string(lo);
}

std::string InputShapeSpec::dimsText() const {
  std::vector<std::string> parts;
  for (const DimSpec& d : dims)
    parts.push_back(d.toString());
  return fmt::format("{}", fmt::join(parts, ","));
}

bool ShapeSpec::hasDynamic() const {
  for (const auto& in : inputs)
    for (const auto& d : in.dims)
      if (!d.isStatic()) return true;
  return false;
}

Expected<ShapeSpec> parseShapeSpec(const std::string& text, ShapeDialect dialect) {
  ShapeSpec spec;
  spec.dialect = dialect;
  std::vector<std::string> entries;
  for (const std::string& e : split(text, ';'))
    if (!trim(e).empty()) entries.push_back(e);
  if (entries.empty()) {
    if (dialect == ShapeDialect::ConverterLite) return liteIllegal("--inputShape is empty");
    return atcSyntax(text, "The shape must contain two parts: name and value");
  }
  size_t named = 0;
  for (const auto& e : entries)
    named += e.find(':') != std::string::npos;
  if (dialect == ShapeDialect::Atc && named == 0) spec.positional = true;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& entry = entries[i];
    InputShapeSpec input;
    input.position = i;
    input.text = trim(entry);
    std::string dimsText = entry;
    if (!spec.positional) {
      size_t colon = entry.rfind(':'); // names may contain ':' (x:0), so split at the last one
      if (colon == std::string::npos) {
        if (dialect == ShapeDialect::ConverterLite)
          return liteIllegal(
              fmt::format("'{}' in --inputShape has no ':' between name and dims", input.text));
        return atcSyntax(input.text, "The shape must contain two parts: name and value");
      }
      input.name = trim(entry.substr(0, colon));
      dimsText = entry.substr(colon + 1);
      if (input.name.empty()) {
        if (dialect == ShapeDialect::ConverterLite)
          return liteIllegal("an --inputShape entry has no name");
        return atcSyntax(input.text, "The input name is empty");
      }
    }
    if (dialect == ShapeDialect::Atc) {
      for (char c : dimsText)
        if (!std::isdigit(static_cast<unsigned char>(c)) && c != ' ' && c != ',' && c != '~' &&
            c != '-') {
          if (c == '.')
            return atcSyntax(input.text, "The float number is unsupported",
                             "\"input_name1:1,3,224,224\"");
          if (std::isalpha(static_cast<unsigned char>(c)))
            return atcSyntax(input.text, "It is not a digit", "\"input_name1:1,3,224,224\"");
          return atcSyntax(input.text, "The shape must contain two parts: name and value");
        }
    }
    if (trim(dimsText).empty()) {
      if (dialect == ShapeDialect::ConverterLite)
        return liteIllegal(fmt::format("'{}' in --inputShape has no dims", input.text));
      spec.inputs.push_back(std::move(input)); // ATC: empty dims = scalar input
      continue;
    }
    for (const std::string& part : split(dimsText, ',')) {
      KILN_ASSIGN_OR_RETURN(DimSpec dim, parseDim(part, input.text, dialect));
      input.dims.push_back(dim);
    }
    spec.inputs.push_back(std::move(input));
  }
  std::set<std::string> seen;
  for (const auto& in : spec.inputs)
    if (!in.name.empty() && !seen.insert(in.name).second) {
      if (dialect == ShapeDialect::ConverterLite)
        return liteIllegal(fmt::format("input '{}' is given twice", in.name));
      return atcSyntax(in.text, fmt::format("The input {} is given more than once", in.name));
    }
  return spec;
}

Value* findSpecInput(const InputShapeSpec& entry, const Graph& graph) {
  std::vector<Value*> inputs;
  for (Value* in : graph.inputs())
    if (!in->isInitializer()) inputs.push_back(in);
  if (entry.name.empty()) return entry.position < inputs.size() ? inputs[entry.position] : nullptr;
  for (Value* in : inputs)
    if (in->name() == entry.name) return in;
  return nullptr;
}

namespace {

// The model's shape as ints (-1 for dims that are not static).
std::vector<int64_t> modelDims(const Value& value) {
  std::vector<int64_t> out;
  for (const Dim& d : value.shape().dims())
    out.push_back(d.isStatic() ? d.value() : -1);
  return out;
}

bool fits(const std::vector<int64_t>& given, const std::vector<int64_t>& model) {
  for (size_t i = 0; i < given.size(); ++i)
    if (model[i] >= 0 && given[i] != model[i]) return false;
  return true;
}

std::string dimsString(const std::vector<int64_t>& dims) {
  return fmt::format("{}", fmt::join(dims, ","));
}

// When the given 4-D shape is the model's with channels moved (NHWC given for NCHW or the reverse),
// names the mix-up and the shape that would be right.
std::string layoutHint(const std::vector<int64_t>& given, const std::vector<int64_t>& model) {
  if (given.size() != 4) return "";
  std::vector<int64_t> toNchw = {given[0], given[3], given[1], given[2]};
  std::vector<int64_t> toNhwc = {given[0], given[2], given[3], given[1]};
  if (fits(toNchw, model) && model[1] >= 0)
    return fmt::format(
        "the shape looks like NHWC but the model input is NCHW (channels={} on axis 1): use {}",
        model[1], dimsString(toNchw));
  if (fits(toNhwc, model) && model[3] >= 0)
    return fmt::format(
        "the shape looks like NCHW but the model input is NHWC (channels={} on axis 3): use {}",
        model[3], dimsString(toNhwc));
  return "";
}

} // namespace

std::vector<Status> validateShapeSpec(const ShapeSpec& spec, const Graph& graph) {
  std::vector<Status> problems;
  std::vector<std::string> names;
  for (const Value* in : graph.inputs())
    if (!in->isInitializer()) names.push_back(in->name());
  const char* flag = spec.dialect == ShapeDialect::Atc ? "--input_shape" : "--inputShape";
  for (const InputShapeSpec& entry : spec.inputs) {
    Value* input = findSpecInput(entry, graph);
    if (!input) {
      std::string what = entry.name.empty()
                             ? fmt::format("Input #{} given in {}", entry.position, flag)
                             : fmt::format("Op name {} specified in {}", entry.name, flag);
      problems.push_back(
          Status(
              ErrorCode::ShapeSpecUnknownInput,
              fmt::format("{} is not found in the model. Confirm whether this node name exists, or "
                          "whether the node is not split with the specified delimiter ';'.",
                          what),
              fmt::format("the model's inputs are: {}", fmt::join(names, ", ")))
              .withPeerCode("E10016"));
      continue;
    }
    if (!input->shape().hasRank()) continue; // nothing to check against
    std::vector<int64_t> model = modelDims(*input);
    if (model.size() != entry.dims.size()) {
      problems.push_back(
          Status(ErrorCode::ShapeSpecRankMismatch,
                 fmt::format(
                     "Dimension count {} configured in {} does not match dimension count {} of "
                     "the node. (input '{}' is {} in the model)",
                     entry.dims.size(), flag, model.size(), input->name(),
                     input->shape().toString()),
                 fmt::format("give {} dims for '{}'", model.size(), input->name()))
              .withPeerCode("E10049"));
      continue;
    }
    std::vector<int64_t> given;
    std::vector<size_t> bad;
    for (size_t i = 0; i < model.size(); ++i) {
      const DimSpec& d = entry.dims[i];
      given.push_back(d.isStatic() ? d.lo : -1);
      if (d.isStatic() && model[i] >= 0 && d.lo != model[i]) bad.push_back(i);
    }
    if (bad.empty()) continue;
    std::string hint = layoutHint(given, model);
    std::string axes;
    for (size_t i : bad)
      axes += fmt::format("{}axis {} is {} in the model but {} in {}", axes.empty() ? "" : "; ", i,
                          model[i], given[i], flag);
    problems.push_back(
        Status(ErrorCode::ShapeSpecDimMismatch,
               fmt::format("input '{}': shape {} disagrees with the model's {}: {}", input->name(),
                           dimsString(given), input->shape().toString(), axes),
               hint.empty() ? fmt::format("use the model's static dims for '{}'", input->name())
                            : hint)
            .withPeerCode("E10001"));
  }
  return problems;
}

namespace {

// ATC caps --dynamic_dims (only) at 100 profiles.
constexpr size_t kMaxDimsProfiles = 100;

Status gearError(const char* peer, const std::string& message, const std::string& hint = "") {
  return Status(ErrorCode::DynamicProfileInvalid, message,
                hint.empty() ? "see atc --help for the dynamic gear flags" : hint)
      .withPeerCode(peer);
}

Expected<std::vector<std::vector<int64_t>>>
parseProfiles(const std::string& text, const std::string& flag, bool perProfileSemicolon) {
  std::vector<std::vector<int64_t>> gears;
  std::vector<std::string> groups;
  if (perProfileSemicolon) {
    for (const auto& g : split(text, ';'))
      if (!trim(g).empty()) groups.push_back(g);
  } else {
    for (const auto& g : split(text, ','))
      if (!trim(g).empty()) groups.push_back(g);
  }
  for (const auto& group : groups) {
    std::vector<int64_t> gear;
    for (const auto& part :
         perProfileSemicolon ? split(group, ',') : std::vector<std::string>{group}) {
      std::string t = trim(part);
      int64_t v = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
        if (flag == "dynamic_dims")
          return gearError(
              "E10001",
              fmt::format("Value {} for parameter --dynamic_dims is invalid. Reason: Dynamic dims "
                          "must be a positive integer.",
                          t));
        return gearError(
            "E10003",
            fmt::format("Value {} for parameter --{} is invalid. Reason: It can only contain "
                        "digits and \",\".",
                        text, flag));
      }
      if (v <= 0)
        return gearError(
            "E10038",
            fmt::format("Dimension size {} is invalid. The value must be greater than 0.", v));
      gear.push_back(v);
    }
    gears.push_back(gear);
  }
  return gears;
}

} // namespace

Status validateDynamicProfiles(DynamicProfiles& profiles, const std::string& inputShapeText,
                               const ShapeSpec* spec) {
  int set = !profiles.batchSize.empty() + !profiles.imageSize.empty() + !profiles.dims.empty();
  if (set == 0) return Status::ok();
  if (set > 1)
    return gearError(
        "E10009",
        "--dynamic_batch_size, --dynamic_image_size, --input_shape_range, and --dynamic_dims "
        "are mutually exclusive.");
  if (inputShapeText.empty() || !spec)
    return gearError("E10004", "Value for --input_shape is empty.");
  for (const auto& in : spec->inputs)
    for (const auto& d : in.dims)
      if (d.ranged)
        return gearError(
            "E10040",
            "As the --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims argument is "
            "included, the corresponding nodes specified in --input_shape must have -1 axes and "
            "cannot have '~'.");
  const char* kind = "--dynamic_batch_size, --dynamic_image_size, or --dynamic_dims";
  if (!profiles.batchSize.empty()) {
    for (char c : profiles.batchSize)
      if (!std::isdigit(static_cast<unsigned char>(c)) && c != ',')
        return gearError(
            "E10003",
            fmt::format("Value {} for parameter --dynamic_batch_size is invalid. Reason: It can "
                        "only contain digits and \",\".",
                        profiles.batchSize));
    bool anyBatch = false;
    for (const auto& in : spec->inputs) {
      if (in.dims.empty())
        return gearError(
            "E10012",
            "--dynamic_batch_size is included, but the dimension count of the dynamic-shape "
            "input configured in --input_shape is less than 1.");
      for (size_t i = 0; i < in.dims.size(); ++i)
        if (in.dims[i].isUnknown()) {
          if (i != 0)
            return gearError(
                "E10018",
                fmt::format("Value {} for shape {} is invalid. When --dynamic_batch_size is "
                            "included, only batch size N can be -1 in --input_shape.",
                            in.dimsText(), in.position));
          anyBatch = true;
        }
    }
    if (!anyBatch)
      return gearError(
          "E10031",
          "--dynamic_batch_size is included, but none of the nodes specified in --input_shape "
          "has a batch size equaling -1.");
    KILN_ASSIGN_OR_RETURN(profiles.gears,
                          parseProfiles(profiles.batchSize, "dynamic_batch_size", false));
  } else if (!profiles.imageSize.empty()) {
    for (char c : profiles.imageSize)
      if (!std::isdigit(static_cast<unsigned char>(c)) && c != ',' && c != ' ' && c != ';')
        return gearError(
            "E10003",
            fmt::format("Value {} for parameter --dynamic_image_size is invalid. Reason: It can "
                        "only contain digits, \",\", \" \" and \";\".",
                        profiles.imageSize));
    if (!profiles.inputFormat.empty() && profiles.inputFormat != "NCHW" &&
        profiles.inputFormat != "NHWC")
      return gearError(
          "E10003",
          fmt::format("Value {} for parameter --input_format is invalid. Reason: This format is "
                      "not supported.",
                      profiles.inputFormat));
    // Image gears resize 4-D images only: a -1 in an input of another rank, or no 4-D input
    // with a -1 at all, is the same mistake to ATC.
    const char* hwOnly = "When --dynamic_image_size is included, only the height and width axes "
                         "can be -1 in --input_shape.";
    const std::string format = profiles.inputFormat.empty() ? "NCHW" : profiles.inputFormat;
    size_t h = format == "NCHW" ? 2 : 1, w = h + 1;
    bool anyImage = false;
    for (const auto& in : spec->inputs)
      for (size_t i = 0; i < in.dims.size(); ++i) {
        if (!in.dims[i].isUnknown()) continue;
        if (in.dims.size() != 4 || (i != h && i != w))
          return gearError("E10019", hwOnly,
                           fmt::format("input {} ({}): give -1 only on the height and width of "
                                       "a 4-D {} input",
                                       in.name.empty() ? std::to_string(in.position) : in.name,
                                       in.dimsText(), format));
        anyImage = true;
      }
    if (!anyImage)
      return gearError("E10019", hwOnly,
                       "set the height and width of the image input to -1 in --input_shape");
    KILN_ASSIGN_OR_RETURN(profiles.gears,
                          parseProfiles(profiles.imageSize, "dynamic_image_size", true));
    for (const auto& g : profiles.gears)
      if (g.size() != 2)
        return gearError("E10020",
                         fmt::format("Value {} for parameter --dynamic_image_size is invalid.",
                                     profiles.imageSize),
                         "each profile is \"height,width\"");
  } else {
    // Dims gears index the -1 axes of plain ND tensors; ATC refuses them on a layout it would
    // otherwise transform, and on inputs of more than 4 dims.
    if (profiles.inputFormat != "ND")
      return gearError(
          "E10001",
          profiles.inputFormat.empty()
              ? std::string("--dynamic_dims needs --input_format=ND; --input_format is not set "
                            "(NCHW by default).")
              : fmt::format("Value {} for parameter --input_format is invalid. Reason: "
                            "--dynamic_dims needs --input_format=ND.",
                            profiles.inputFormat),
          "add --input_format=ND (CANN's atc refuses --dynamic_dims without it)");
    for (const auto& in : spec->inputs)
      if (in.dims.size() > 4)
        return gearError(
            "E10001",
            fmt::format("Value {} for parameter --input_shape is invalid. Reason: with "
                        "--dynamic_dims an input has at most 4 dims; this one has {}.",
                        in.dimsText(), in.dims.size()),
            "reshape the input to at most 4 dims in the model, or use a static shape");
    std::string trimmed = trim(profiles.dims);
    while (!trimmed.empty() && trimmed.back() == ';')
      trimmed.pop_back();
    if (trimmed.empty())
      return gearError("E10058", "Parameter --dynamic_dims is not configured or is empty.");
    size_t unknown = 0;
    for (const auto& in : spec->inputs)
      for (const auto& d : in.dims)
        unknown += d.isUnknown();
    if (unknown == 0)
      return gearError(
          "E10001",
          "Value 0 for parameter --input_shape's dynamic dim num is invalid. Reason: At least "
          "one dim should be -1 when dynamic_dims is set.");
    KILN_ASSIGN_OR_RETURN(profiles.gears, parseProfiles(trimmed, "dynamic_dims", true));
    if (profiles.gears.size() > kMaxDimsProfiles)
      return gearError("E10036", fmt::format("{} has {} profiles, which is greater than the "
                                             "maximum {}.",
                                             kind, profiles.gears.size(), kMaxDimsProfiles));
    for (const auto& g : profiles.gears)
      if (g.size() != unknown)
        return gearError(
            "E10003",
            fmt::format("Value {} for parameter --dynamic_dims is invalid. Reason: Each setting "
                        "needs to be consistent with the number of -1 in the input shape.",
                        profiles.dims));
  }
  if (profiles.gears.size() < 2)
    return gearError("E10035", fmt::format("{} has {} profiles, which is less than the minimum 2.",
                                           kind, profiles.gears.size()));
  for (const auto& g : profiles.gears)
    if (g.size() != profiles.gears.front().size())
      return gearError("E10037", fmt::format("{} has profiles of different lengths.", kind));
  std::set<std::vector<int64_t>> unique(profiles.gears.begin(), profiles.gears.end());
  if (unique.size() != profiles.gears.size())
    return gearError(
        "E10039", "The --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims argument has "
                  "duplicate profiles.");
  return Status::ok();
}

} // namespace kiln
