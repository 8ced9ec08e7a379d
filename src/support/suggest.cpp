// closestSpelling: edit-distance suggestions for unknown flags and values.
#include "kiln/support/suggest.h"

#include <algorithm>
#include <cctype>

namespace kiln {
namespace {

// The spelling differences users do not see as differences: case, and '-' for '_'.
std::string folded(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += c == '-' ? '_' : static_cast<char>(std::tolower(c));
  return out;
}

} // namespace

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closestSpelling(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string key = folded(word);
  const size_t allowed = std::max<size_t>(2, key.size() / 3);
  std::string best;
  size_t bestDistance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const size_t d = editDistance(key, folded(candidate));
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

} // namespace kiln
