#pragma once
// Text from outside (hostfile lines, what a remote node or ssh printed, names from a config) made safe to show on a
// terminal and short enough for a message. A terminal obeys control sequences, so an ESC in ssh's error text or in a
// hostfile line could move the cursor, rewrite earlier lines or retitle the window: every byte that is not printable
// UTF-8 is shown escaped (`\x1b`) instead. JSON escapes by itself; these are for text output only.

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep::mpi_launcher {

// The longest value a message repeats whole; longer ones are cut (and the message says how much was cut).
inline constexpr std::size_t message_value_limit = 200;

namespace detail {

// Length of the valid UTF-8 sequence at `at` that encodes a printable code point (no C1 control), or 0.
inline std::size_t printable_utf8_length(std::string_view text, std::size_t at) noexcept {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(at);
    std::size_t length = 0;
    char32_t code = 0;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
        code = lead & 0x1fU;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        code = lead & 0x0fU;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        code = lead & 0x07U;
    } else {
        return 0;
    }
    if (at + length > text.size()) return 0;
    for (std::size_t i = 1; i < length; ++i) {
        if ((byte(at + i) & 0xc0U) != 0x80U) return 0;
        code = (code << 6U) | (byte(at + i) & 0x3fU);
    }
    const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
    const bool surrogate = code >= 0xd800 && code <= 0xdfff;
    const bool c1_control = code >= 0x80 && code <= 0x9f;
    if (overlong || surrogate || c1_control || code > 0x10ffff) return 0;
    return length;
}

}  // namespace detail

// Every control character (C0, DEL, C1) and every byte that is not part of valid UTF-8 as `\xNN`; a backslash stays
// as it is. Newlines are kept when `keep_newlines` (a multi-line message), tabs always.
[[nodiscard]] inline std::string escape_control(std::string_view text, bool keep_newlines = false) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
            ++i;
        } else if (c == '\t' || (c == '\n' && keep_newlines)) {
            out += static_cast<char>(c);
            ++i;
        } else if (const std::size_t n = c >= 0x80 ? detail::printable_utf8_length(text, i) : 0; n > 0) {
            out.append(text.substr(i, n));
            i += n;
        } else {
            out += fmt::format("\\x{:02x}", c);
            ++i;
        }
    }
    return out;
}

// The value whole when it is at most `limit` bytes; otherwise its first `limit` bytes (not splitting a UTF-8
// sequence) and a note of how much was cut, so that a message about a 1 MB word stays one line long.
[[nodiscard]] inline std::string cut_value(std::string_view text, std::size_t limit = message_value_limit) {
    if (text.size() <= limit) return std::string(text);
    std::size_t keep = limit;
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xc0U) == 0x80U) --keep;
    return fmt::format("{}[... {} more bytes cut; {} in all]", text.substr(0, keep), text.size() - keep, text.size());
}

// Both: what a message shows of an outside value.
[[nodiscard]] inline std::string shown_value(std::string_view text, std::size_t limit = message_value_limit) {
    return escape_control(cut_value(text, limit));
}

}  // namespace lockstep::mpi_launcher
