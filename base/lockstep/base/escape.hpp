#pragma once
// Text from outside (a config value, a hostfile line, what a remote node or ssh printed) made safe to show on a
// terminal and short enough for a message. A terminal obeys control sequences, so an ESC in ssh's error text or in a
// config value could move the cursor, rewrite earlier lines or retitle the window: every byte that is not printable
// UTF-8 is shown escaped (`\x1b`) instead. That covers C0 controls, DEL, the C1 controls (U+0080-U+009F, which some
// terminals obey both as single bytes and UTF-8 encoded; 0x9b is CSI) and every byte that is not part of valid UTF-8.
// JSON escapes by itself; these are for text output only.

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep::base {

// How escape_control writes the two controls that ordinary text carries: tab and newline.
enum class EscapeStyle {
    one_line,  // one line of a table or a message: a tab stays, a newline is \x0a
    lines,     // a message of several lines: tab and newline stay
    quoted,    // a value inside quotes: \t and \n, so that only printable characters remain
};

// Every control character (C0, DEL, C1) and every byte that is not part of valid UTF-8 as `\xNN`, tab and newline as
// `style` says; printable ASCII and printable UTF-8 stay as they are, a backslash too.
[[nodiscard]] std::string escape_control(std::string_view text, EscapeStyle style = EscapeStyle::one_line);

// The longest prefix of `text` of at most `limit` bytes that does not end inside a UTF-8 sequence.
[[nodiscard]] std::size_t utf8_prefix_length(std::string_view text, std::size_t limit) noexcept;

// A value as a message quotes it: in single quotes, escaped (EscapeStyle::quoted), and cut after its first 80 bytes
// with its length said, so that a huge value cannot flood a log: 'xxxx...' (50000000 bytes).
[[nodiscard]] std::string quote_value(std::string_view text);

// The longest value a message repeats whole; longer ones are cut (and the message says how much was cut).
inline constexpr std::size_t message_value_limit = 200;

// The value whole when it is at most `limit` bytes; otherwise its first `limit` bytes (not splitting a UTF-8
// sequence) and a note of how much was cut, so that a message about a 1 MB word stays one line long. Not escaped.
[[nodiscard]] std::string cut_value(std::string_view text, std::size_t limit = message_value_limit);

// Both: what a message shows of an outside value, on one line.
[[nodiscard]] std::string shown_value(std::string_view text, std::size_t limit = message_value_limit);

}  // namespace lockstep::base
