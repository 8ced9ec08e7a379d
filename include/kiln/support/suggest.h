// "Did you mean" for mistyped flag names and values: the closest known spelling by edit distance.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

// The candidate closest to `word` when it is close enough to be a slip of the keyboard: letter
// case and '-' versus '_' count as the same, then at most a third of the letters (at least two)
// differ by Levenshtein distance. Ties go to the earlier candidate. "" when nothing is that close.
// Levenshtein distance (insertions, deletions, substitutions), byte by byte.
size_t editDistance(const std::string& a, const std::string& b);

std::string closestSpelling(const std::string& word, const std::vector<std::string>& candidates);

} // namespace kiln
