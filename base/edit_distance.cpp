#include <lockstep/base/edit_distance.hpp>

#include <algorithm>

namespace lockstep::base {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // Three rows of the (a.size() + 1) x (b.size() + 1) table: a swap looks two rows back.
    std::vector<std::size_t> before(b.size() + 1);
    std::vector<std::size_t> previous(b.size() + 1);
    std::vector<std::size_t> current(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        current[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                current[j] = std::min(current[j], before[j - 2] + 1);
            }
        }
        std::swap(before, previous);
        std::swap(previous, current);
    }
    return previous[b.size()];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
    constexpr std::size_t longest_word = 64;
    if (word.size() > longest_word) return std::nullopt;
    const std::size_t allowed = word.size() <= 4 ? 1 : 2;
    std::optional<std::string> best;
    std::size_t best_distance = allowed + 1;
    for (const auto& candidate : candidates) {
        // The distance is at least the difference in length: a candidate that much longer or shorter is not compared.
        const std::size_t gap =
            word.size() > candidate.size() ? word.size() - candidate.size() : candidate.size() - word.size();
        if (gap >= best_distance) continue;
        const std::size_t distance = edit_distance(word, candidate);
        if (distance < best_distance && distance < candidate.size() && distance < word.size()) {
            best_distance = distance;
            best = candidate;
        }
    }
    if (best || word.size() < 3) return best;
    std::optional<std::string> prefixed;
    for (const auto& candidate : candidates) {
        if (candidate.starts_with(word)) {
            if (prefixed) return std::nullopt;  // ambiguous
            prefixed = candidate;
        }
    }
    return prefixed;
}

}  // namespace lockstep::base
