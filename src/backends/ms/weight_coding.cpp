// INDEXING / SPARSE weight coding (ms.md §3.4). Hand-written: the streams are MindSpore Lite's own
// bit layouts, which no general-purpose library produces.
#include "weight_coding.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::ms {
namespace {

constexpr int kGapWidthBits = 8;
constexpr int kEntryCountBits = 32;

// Appends values most significant bit first, bytes filled from their top bit. `reserve` sizes the
// stream up front (the encoders know their exact size).
class BitWriter {
 public:
  explicit BitWriter(uint64_t reserveBits = 0) { bytes_.reserve((reserveBits + 7) / 8); }
  void put(uint64_t value, int bits) {
    if (bits == 0) return;
    value &= bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    // Whole bytes leave the accumulator as soon as they are full; it holds fewer than 8 bits
    // between calls, so up to 56 new bits fit.
    while (bits > 0) {
      const int take = std::min(bits, 56);
      bits -= take;
      acc_ = (acc_ << take) | ((value >> bits) & ((uint64_t{1} << take) - 1));
      accBits_ += take;
      while (accBits_ >= 8) {
        accBits_ -= 8;
        bytes_.push_back(static_cast<uint8_t>(acc_ >> accBits_));
      }
      acc_ &= (uint64_t{1} << accBits_) - 1;
    }
  }
  std::vector<uint8_t> take() {
    if (accBits_ > 0) bytes_.push_back(static_cast<uint8_t>(acc_ << (8 - accBits_)));
    accBits_ = 0;
    acc_ = 0;
    return std::move(bytes_);
  }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t acc_ = 0;
  int accBits_ = 0;
};

class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), bits_(uint64_t{size} * 8) {}
  bool get(int bits, uint64_t* value) {
    if (pos_ + static_cast<uint64_t>(bits) > bits_) return false;
    uint64_t v = 0;
    for (int b = 0; b < bits; ++b, ++pos_)
      v = (v << 1) | ((data_[pos_ / 8] >> (7 - pos_ % 8)) & 1u);
    *value = v;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t bits_;
  uint64_t pos_ = 0;
};

// ceil(log2(n)) for n ≥ 1: the index width for n unique values.
int indexBits(uint64_t n) {
  int bits = 0;
  while ((uint64_t{1} << bits) < n)
    ++bits;
  return bits;
}

// The sorted unique codes of a `bits`-wide stream and each code's position among them (a table
// over the code range: weights hold millions of codes).
struct UniqueSet {
  std::vector<int32_t> values;
  std::vector<int32_t> position; // by code + 2^(bits-1); -1 when absent
  int bias = 0;
  uint32_t at(int32_t code) const { return static_cast<uint32_t>(position[code + bias]); }
};
UniqueSet uniqueOf(const std::vector<int32_t>& codes, int bits) {
  UniqueSet u;
  u.bias = 1 << (bits - 1);
  std::vector<bool> present(size_t{1} << bits, false);
  for (int32_t c : codes)
    present[c + u.bias] = true;
  u.position.assign(present.size(), -1);
  for (size_t i = 0; i < present.size(); ++i)
    if (present[i]) {
      u.position[i] = static_cast<int32_t>(u.values.size());
      u.values.push_back(static_cast<int32_t>(i) - u.bias);
    }
  return u;
}

void putUniqueValues(BitWriter& w, const std::vector<int32_t>& values, int bits) {
  const int64_t bias = int64_t{1} << (bits - 1);
  w.put(values.size() & ((uint64_t{1} << bits) - 1), bits); // 2^bits is written as 0
  for (int32_t v : values)
    w.put(static_cast<uint64_t>(v + bias), bits);
}

Status damaged(const std::string& where, const std::string& what) {
  return Status(ErrorCode::MsFileInvalid, where + ": " + what,
                "pass a complete .ms file written by converter_lite or kiln");
}

Expected<std::vector<int32_t>> readUniqueValues(BitReader& r, int bits, const std::string& where,
                                                const char* coding) {
  uint64_t count = 0;
  if (!r.get(bits, &count)) return damaged(where, fmt::format("{} stream ends early", coding));
  if (count == 0) count = uint64_t{1} << bits;
  const int64_t bias = int64_t{1} << (bits - 1);
  std::vector<int32_t> values(count);
  for (auto& v : values) {
    uint64_t u = 0;
    if (!r.get(bits, &u))
      return damaged(where, fmt::format("{} stream ends inside its value table", coding));
    v = static_cast<int32_t>(static_cast<int64_t>(u) - bias);
  }
  return values;
}

// The zero point of element k by the runtime's channel rule.
int32_t zeroPointAt(const std::vector<int32_t>& zeroPoints, uint64_t perChannel, uint64_t k) {
  return zeroPoints[std::min<uint64_t>(k / perChannel, zeroPoints.size() - 1)];
}

// What a SPARSE stream of `codes` holds, worked out without writing it: the gap width, the entry
// count and the unique entry codes. Pick the gap width from the runs of zero points: a run of L
// before an entry costs floor(L / 2^w) extra zero-point entries at width w. The table size is
// estimated for the choice (zero points that become entries are counted once per channel); the
// entry set is then exact.
struct SparsePlan {
  int gapBits = 1;
  uint64_t entries = 0;
  UniqueSet unique; // of the entry codes
  uint64_t totalBits = 0;
};
SparsePlan planSparse(const std::vector<int32_t>& codes, int bits,
                      const std::vector<int32_t>& zeroPoints) {
  const uint64_t perChannel = std::max<uint64_t>(1, codes.size() / zeroPoints.size());
  // Runs of zero points before each non-zero entry, then the trailing run, as a histogram (most
  // runs are short) plus the long ones.
  constexpr uint64_t kShort = uint64_t{1} << 16;
  std::vector<uint64_t> shortRuns;
  std::vector<uint64_t> longRuns;
  const size_t table = size_t{1} << bits;
  std::vector<uint8_t> nonZeroPresent(table, 0);
  uint64_t nonZero = 0, run = 0, maxShort = 0;
  auto addRun = [&](uint64_t r) {
    if (r >= kShort) {
      longRuns.push_back(r);
      return;
    }
    if (r >= shortRuns.size()) shortRuns.resize(std::max<uint64_t>(r + 1, shortRuns.size() * 2));
    ++shortRuns[r];
    maxShort = std::max(maxShort, r);
  };
  const int32_t bias = 1 << (bits - 1);
  for (uint64_t c = 0, k = 0; k < codes.size(); ++c) {
    // One channel (the last takes the remainder) at a time: its zero point is fixed.
    const uint64_t end = c + 1 >= zeroPoints.size() ? codes.size()
                                                    : std::min<uint64_t>(codes.size(), k + perChannel);
    const int32_t zp = zeroPoints[std::min<uint64_t>(c, zeroPoints.size() - 1)];
    for (; k < end; ++k) {
      if (codes[k] == zp) {
        ++run;
        continue;
      }
      addRun(run);
      nonZeroPresent[static_cast<size_t>(codes[k] + bias)] = 1;
      ++nonZero;
      run = 0;
    }
  }
  addRun(run);
  uint64_t unique = 0;
  for (uint8_t p : nonZeroPresent)
    unique += p;
  SparsePlan plan;
  uint64_t bestBits = UINT64_MAX;
  for (int gapBits = 1; gapBits <= 16; ++gapBits) {
    uint64_t forced = 0;
    for (uint64_t r = uint64_t{1} << gapBits; r <= maxShort; ++r)
      forced += shortRuns[r] * (r >> gapBits);
    for (uint64_t r : longRuns)
      forced += r >> gapBits;
    const uint64_t entries = nonZero + forced;
    const uint64_t tableSize = unique + (forced ? zeroPoints.size() : 0);
    const uint64_t total = kGapWidthBits + kEntryCountBits + (tableSize + 1) * uint64_t(bits) +
                           entries * uint64_t(indexBits(tableSize) + gapBits);
    if (total < bestBits) {
      bestBits = total;
      plan.gapBits = gapBits;
    }
  }
  // The exact entry set at that width: the non-zero codes and the zero points a long run forces
  // into entries.
  const uint64_t maxGap = (uint64_t{1} << plan.gapBits) - 1;
  std::vector<bool> present(table, false);
  for (size_t i = 0; i < table; ++i)
    present[i] = nonZeroPresent[i] != 0;
  uint64_t gap = 0, entries = 0;
  for (uint64_t k = 0; k < codes.size(); ++k) {
    const int32_t code = codes[k];
    if (code != zeroPointAt(zeroPoints, perChannel, k) || gap == maxGap) {
      present[static_cast<size_t>(code + bias)] = true;
      ++entries;
      gap = 0;
    } else {
      ++gap;
    }
  }
  plan.entries = entries;
  plan.unique.bias = bias;
  plan.unique.position.assign(table, -1);
  for (size_t i = 0; i < table; ++i)
    if (present[i]) {
      plan.unique.position[i] = static_cast<int32_t>(plan.unique.values.size());
      plan.unique.values.push_back(static_cast<int32_t>(i) - bias);
    }
  const uint64_t u = plan.unique.values.size();
  plan.totalBits = kGapWidthBits + kEntryCountBits + (u + 1) * uint64_t(bits) +
                   entries * uint64_t(indexBits(u) + plan.gapBits);
  return plan;
}

uint64_t indexingBits(const UniqueSet& u, uint64_t count, int bits) {
  return (u.values.size() + 1) * uint64_t(bits) + count * uint64_t(indexBits(u.values.size()));
}

} // namespace

std::vector<uint8_t> encodeIndexing(const std::vector<int32_t>& codes, int bits) {
  UniqueSet u = uniqueOf(codes, bits);
  BitWriter w(indexingBits(u, codes.size(), bits));
  putUniqueValues(w, u.values, bits);
  const int width = indexBits(u.values.size());
  for (int32_t c : codes)
    w.put(u.at(c), width);
  return w.take();
}

size_t indexingSize(const std::vector<int32_t>& codes, int bits) {
  return static_cast<size_t>((indexingBits(uniqueOf(codes, bits), codes.size(), bits) + 7) / 8);
}

size_t sparseSize(const std::vector<int32_t>& codes, int bits,
                  const std::vector<int32_t>& zeroPoints) {
  return static_cast<size_t>((planSparse(codes, bits, zeroPoints).totalBits + 7) / 8);
}

std::vector<uint8_t> encodeSparse(const std::vector<int32_t>& codes, int bits,
                                  const std::vector<int32_t>& zeroPoints) {
  const SparsePlan plan = planSparse(codes, bits, zeroPoints);
  const uint64_t perChannel = std::max<uint64_t>(1, codes.size() / zeroPoints.size());
  const uint64_t maxGap = (uint64_t{1} << plan.gapBits) - 1;
  BitWriter w(plan.totalBits);
  w.put(static_cast<uint64_t>(plan.gapBits), kGapWidthBits);
  w.put(plan.entries, kEntryCountBits);
  putUniqueValues(w, plan.unique.values, bits);
  const int width = indexBits(plan.unique.values.size());
  // Two passes over the entries (indices, then gaps), as the stream lays them out.
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t gap = 0;
    for (uint64_t k = 0; k < codes.size(); ++k) {
      const int32_t code = codes[k];
      if (code != zeroPointAt(zeroPoints, perChannel, k) || gap == maxGap) {
        if (pass == 0)
          w.put(plan.unique.at(code), width);
        else
          w.put(gap, plan.gapBits);
        gap = 0;
      } else {
        ++gap;
      }
    }
  }
  return w.take();
}

Expected<std::vector<int32_t>> decodeIndexing(const uint8_t* data, size_t size, int bits,
                                              uint64_t count, const std::string& where) {
  BitReader r(data, size);
  auto values = readUniqueValues(r, bits, where, "INDEXING");
  if (!values) return values.status();
  const int width = indexBits(values->size());
  std::vector<int32_t> codes(count);
  for (auto& c : codes) {
    uint64_t index = 0;
    if (!r.get(width, &index))
      return damaged(where, fmt::format("INDEXING stream holds fewer than {} indices", count));
    if (index >= values->size())
      return damaged(where,
                     fmt::format("INDEXING index {} is past its {} values", index, values->size()));
    c = (*values)[index];
  }
  return codes;
}

Expected<std::vector<int32_t>> decodeSparse(const uint8_t* data, size_t size, int bits,
                                            uint64_t count, const std::vector<int32_t>& zeroPoints,
                                            const std::string& where) {
  if (zeroPoints.empty()) return damaged(where, "SPARSE weights without quant params");
  BitReader r(data, size);
  uint64_t gapBits = 0, entries = 0;
  if (!r.get(kGapWidthBits, &gapBits) || !r.get(kEntryCountBits, &entries))
    return damaged(where, "SPARSE stream ends inside its header");
  auto values = readUniqueValues(r, bits, where, "SPARSE");
  if (!values) return values.status();
  const int width = indexBits(values->size());
  if (entries > count)
    return damaged(where, fmt::format("SPARSE holds {} entries for {} elements", entries, count));
  std::vector<uint64_t> indices(entries), gaps(entries);
  for (auto& index : indices)
    if (!r.get(width, &index) || index >= values->size())
      return damaged(where, "SPARSE index stream is short or points past its values");
  for (auto& gap : gaps)
    if (!r.get(static_cast<int>(gapBits), &gap))
      return damaged(where, "SPARSE gap stream is short");
  const uint64_t perChannel = std::max<uint64_t>(1, count / zeroPoints.size());
  std::vector<int32_t> codes;
  codes.reserve(count);
  for (uint64_t e = 0; e < entries; ++e) {
    if (codes.size() + gaps[e] + 1 > count)
      return damaged(where, fmt::format("SPARSE entries cover more than {} elements", count));
    for (uint64_t g = 0; g < gaps[e]; ++g)
      codes.push_back(zeroPointAt(zeroPoints, perChannel, codes.size()));
    codes.push_back((*values)[indices[e]]);
  }
  while (codes.size() < count)
    codes.push_back(zeroPointAt(zeroPoints, perChannel, codes.size()));
  return codes;
}

} // namespace kiln::ms
