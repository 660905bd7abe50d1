#pragma once
// Suggestions for a mistyped name ("did you mean 'timeout'?"): the command line's commands, options and accepted
// words, and config.yaml's keys, all by one rule, so that a typo is suggested for alike wherever it is made.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::base {

// The optimal string alignment distance: insertions, deletions, substitutions and swaps of two adjacent characters,
// each one edit. Counting a swap as one edit ("tset" is one from "test", "timeuot" one from "timeout") matches the most
// common typing mistake, which plain Levenshtein distance counts as two.
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate that `word` most likely stands for, or nullopt when none is close:
// - the nearest candidate within one edit for a word of up to four characters, two edits for a longer one, where the
//   distance is also smaller than both words' lengths (a word changed in every character is not a typo of it); on a
//   tie, the first such candidate;
// - else, for a word of at least three characters, the only candidate that begins with it ("lau" for launch, "time"
//   for timeout);
// - never for a word longer than 64 characters: no name is that long, and comparing it would cost its length squared.
[[nodiscard]] std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace lockstep::base
