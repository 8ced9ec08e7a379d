// Text kernels: StringNormalizer and TfIdfVectorizer.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <unordered_map>

#include "kiln/runtime/kernel.h"

namespace kiln::rt {
namespace {

// ASCII case folding; locale-specific rules are out of scope for the reference executor.
std::string foldCase(std::string s, bool upper) {
  for (char& ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    ch = static_cast<char>(upper ? std::toupper(u) : std::tolower(u));
  }
  return s;
}

Status stringNormalizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::String) return ctx.fail("input must be a string tensor");
  const auto& dims = x.dims();
  const bool twoDim = dims.size() == 2;
  if (dims.size() != 1 && !(twoDim && dims[0] == 1)) return ctx.fail("input must be [C] or [1, C]");
  const std::string action = ctx.attrString("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return ctx.fail("unknown case_change_action '{}'", action);
  const bool caseSensitive = ctx.attrInt("is_case_sensitive", 0) != 0;
  std::vector<std::string> stopwords;
  if (const Attribute* a = ctx.attr("stopwords")) stopwords = a->asStrings();
  if (!caseSensitive)
    for (auto& w : stopwords)
      w = foldCase(w, false);

  std::vector<std::string> out;
  for (const std::string& s : x.stringValues()) {
    const std::string key = caseSensitive ? s : foldCase(s, false);
    if (std::find(stopwords.begin(), stopwords.end(), key) != stopwords.end()) continue;
    if (action == "NONE")
      out.push_back(s);
    else
      out.push_back(foldCase(s, action == "UPPER"));
  }
  // ONNX keeps one empty string when every element is filtered out.
  if (out.empty()) out.emplace_back();
  const int64_t count = static_cast<int64_t>(out.size());
  std::vector<int64_t> outDims =
      twoDim ? std::vector<int64_t>{1, count} : std::vector<int64_t>{count};
  ctx.setOutput(0, Tensor::strings(outDims, std::move(out)));
  return Status::ok();
}

Status tfIdfVectorizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& dims = x.dims();
  if (dims.size() != 1 && dims.size() != 2) return ctx.fail("input must be [C] or [N, C]");
  const int64_t rows = dims.size() == 2 ? dims[0] : 1;
  const int64_t cols = dims.back();
  const int64_t minGram = ctx.attrInt("min_gram_length", 1);
  const int64_t maxGram = ctx.attrInt("max_gram_length", 1);
  const int64_t maxSkip = ctx.attrInt("max_skip_count", 0);
  const std::string mode = ctx.attrString("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return ctx.fail("unknown mode '{}'", mode);
  if (minGram < 1 || maxGram < minGram) return ctx.fail("bad gram length range");
  const std::vector<int64_t> counts = ctx.attrInts("ngram_counts");
  const std::vector<int64_t> indexes = ctx.attrInts("ngram_indexes");
  const std::vector<float> weights = ctx.attrFloats("weights");

  // Tokens become int64 ids: the values themselves for integer input, pool positions for strings
  // (-1 for a string absent from the pool, which then matches no n-gram).
  std::vector<int64_t> pool;
  std::vector<int64_t> tokens;
  if (x.dtype() == DType::String) {
    std::vector<std::string> poolStrings;
    if (const Attribute* a = ctx.attr("pool_strings")) poolStrings = a->asStrings();
    std::unordered_map<std::string, int64_t> ids;
    for (size_t i = 0; i < poolStrings.size(); ++i) {
      auto [it, fresh] = ids.emplace(poolStrings[i], static_cast<int64_t>(ids.size()));
      pool.push_back(it->second);
    }
    for (const std::string& s : x.stringValues()) {
      auto it = ids.find(s);
      tokens.push_back(it == ids.end() ? -1 : it->second);
    }
  } else if (x.dtype() == DType::Int32 || x.dtype() == DType::Int64) {
    pool = ctx.attrInts("pool_int64s");
    tokens = toInt64Vector(x);
  } else {
    return ctx.fail("input must be string, int32 or int64");
  }

  // n-gram (as its token ids) -> output column, one map per n-gram length.
  std::vector<std::map<std::vector<int64_t>, int64_t>> grams(static_cast<size_t>(maxGram + 1));
  int64_t outCols = 0;
  for (int64_t idx : indexes)
    outCols = std::max(outCols, idx + 1);
  std::vector<double> gramWeight(static_cast<size_t>(outCols), 1.0);
  size_t k = 0; // running n-gram number across all lengths, the index into ngram_indexes
  for (size_t level = 0; level < counts.size(); ++level) {
    const int64_t n = static_cast<int64_t>(level) + 1;
    const int64_t begin = counts[level];
    const int64_t end =
        level + 1 < counts.size() ? counts[level + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end ||
        (end - begin) % n != 0)
      return ctx.fail("ngram_counts do not partition the pool");
    for (int64_t p = begin; p < end; p += n, ++k) {
      if (k >= indexes.size()) return ctx.fail("ngram_indexes is shorter than the pool");
      const int64_t col = indexes[k];
      if (k < weights.size() && col >= 0) gramWeight[static_cast<size_t>(col)] = weights[k];
      if (n > maxGram) continue;
      grams[static_cast<size_t>(n)].emplace(
          std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n), col);
    }
  }

  std::vector<double> tf(static_cast<size_t>(rows * outCols), 0.0);
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = tokens.data() + r * cols;
    double* outRow = tf.data() + r * outCols;
    for (int64_t start = 0; start < cols; ++start) {
      for (int64_t skip = 0; skip <= maxSkip; ++skip) {
        const int64_t stride = skip + 1;
        for (int64_t n = minGram; n <= maxGram; ++n) {
          // A unigram is the same for every skip; count it once.
          if (n == 1 && skip > 0) continue;
          if (start + (n - 1) * stride >= cols) break;
          const auto& table = grams[static_cast<size_t>(n)];
          if (table.empty()) continue;
          gram.clear();
          for (int64_t i = 0; i < n; ++i)
            gram.push_back(row[start + i * stride]);
          auto it = table.find(gram);
          if (it != table.end()) outRow[it->second] += 1;
        }
      }
    }
  }
  if (mode != "TF") {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < outCols; ++c) {
        double& v = tf[static_cast<size_t>(r * outCols + c)];
        const double w = gramWeight[static_cast<size_t>(c)];
        v = mode == "IDF" ? (v > 0 ? w : 0.0) : v * w;
      }
  }
  OutTensor out(DType::Float32, dims.size() == 2 ? std::vector<int64_t>{rows, outCols}
                                                 : std::vector<int64_t>{outCols});
  float* o = out.data<float>();
  for (size_t i = 0; i < tf.size(); ++i)
    o[i] = static_cast<float>(tf[i]);
  ctx.setOutput(0, std::move(out).finish());
  return Status::ok();
}

KILN_REGISTER_KERNEL("StringNormalizer", stringNormalizer);
KILN_REGISTER_KERNEL("TfIdfVectorizer", tfIdfVectorizer);

} // namespace
} // namespace kiln::rt
