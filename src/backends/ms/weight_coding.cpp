// INDEXING / SPARSE weight coding (ms.md §3.4). Hand-written: the streams are MindSpore Lite's own
// bit layouts, which no general-purpose library produces.
#include "weight_coding.h"


#include <fmt/format.h>

namespace kiln::ms {
namespace {

constexpr int kGapWidthBits = 8;
constexpr int kEntryCountBits = 32;

// Appends values most significant bit first, bytes filled from their top bit.
class BitWriter {
 public:
  void put(uint64_t value, int bits) {
    for (int b = bits - 1; b >= 0; --b, ++pos_) {
      if (pos_ % 8 == 0) bytes_.push_back(0);
      if ((value >> b) & 1) bytes_.back() |= static_cast<uint8_t>(0x80u >> (pos_ % 8));
    }
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t pos_ = 0;
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

// (code, gap) entries for a gap width: a run of zero points longer than the width holds is cut
// by writing one zero point as an entry.
struct Entry {
  int32_t code;
  uint64_t gap;
};
std::vector<Entry> sparseEntries(const std::vector<int32_t>& codes,
                                 const std::vector<int32_t>& zeroPoints, int gapBits) {
  const uint64_t maxGap = (uint64_t{1} << gapBits) - 1;
  const uint64_t perChannel = std::max<uint64_t>(1, codes.size() / zeroPoints.size());
  std::vector<Entry> entries;
  uint64_t gap = 0;
  for (uint64_t k = 0; k < codes.size(); ++k) {
    if (codes[k] != zeroPointAt(zeroPoints, perChannel, k) || gap == maxGap) {
      entries.push_back({codes[k], gap});
      gap = 0;
    } else {
      ++gap;
    }
  }
  return entries; // the trailing gap (≤ maxGap) is implied
}

} // namespace

std::vector<uint8_t> encodeIndexing(const std::vector<int32_t>& codes, int bits) {
  UniqueSet u = uniqueOf(codes, bits);
  BitWriter w;
  putUniqueValues(w, u.values, bits);
  const int width = indexBits(u.values.size());
  for (int32_t c : codes)
    w.put(u.at(c), width);
  return w.take();
}

std::vector<uint8_t> encodeSparse(const std::vector<int32_t>& codes, int bits,
                                  const std::vector<int32_t>& zeroPoints) {
  // Pick the gap width from the runs of zero points: a run of L before an entry costs
  // floor(L / 2^w) extra zero-point entries at width w. The table size is estimated (zero points
  // that become entries are counted once per channel); the stream itself is exact.
  const uint64_t perChannel = std::max<uint64_t>(1, codes.size() / zeroPoints.size());
  std::vector<uint64_t> runs; // zero points before each non-zero entry, then the trailing run
  std::vector<int32_t> nonZero;
  uint64_t run = 0;
  for (uint64_t k = 0; k < codes.size(); ++k) {
    if (codes[k] == zeroPointAt(zeroPoints, perChannel, k)) {
      ++run;
      continue;
    }
    runs.push_back(run);
    nonZero.push_back(codes[k]);
    run = 0;
  }
  runs.push_back(run);
  const uint64_t unique = uniqueOf(nonZero, bits).values.size();
  int bestWidth = 1;
  uint64_t bestBits = UINT64_MAX;
  for (int gapBits = 1; gapBits <= 16; ++gapBits) {
    uint64_t forced = 0;
    for (uint64_t r : runs)
      forced += r >> gapBits;
    const uint64_t entries = nonZero.size() + forced;
    const uint64_t tableSize = unique + (forced ? zeroPoints.size() : 0);
    const uint64_t total = kGapWidthBits + kEntryCountBits + (tableSize + 1) * uint64_t(bits) +
                           entries * uint64_t(indexBits(tableSize) + gapBits);
    if (total < bestBits) {
      bestBits = total;
      bestWidth = gapBits;
    }
  }
  std::vector<Entry> entries = sparseEntries(codes, zeroPoints, bestWidth);
  std::vector<int32_t> entryCodes;
  for (const Entry& e : entries)
    entryCodes.push_back(e.code);
  UniqueSet u = uniqueOf(entryCodes, bits);
  BitWriter w;
  w.put(static_cast<uint64_t>(bestWidth), kGapWidthBits);
  w.put(entries.size(), kEntryCountBits);
  putUniqueValues(w, u.values, bits);
  const int width = indexBits(u.values.size());
  for (const Entry& e : entries)
    w.put(u.at(e.code), width);
  for (const Entry& e : entries)
    w.put(e.gap, bestWidth);
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
