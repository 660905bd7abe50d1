#include <lockstep/base/escape.hpp>

#include <fmt/format.h>

namespace lockstep::base {

namespace {

// Length of the valid UTF-8 sequence at `at` that encodes a printable code point (no C1 control), or 0.
std::size_t printable_utf8_length(std::string_view text, std::size_t at) noexcept {
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

}  // namespace

std::string escape_control(std::string_view text, EscapeStyle style) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
            ++i;
        } else if ((c == '\t' || c == '\n') && style == EscapeStyle::quoted) {
            out += c == '\t' ? "\\t" : "\\n";
            ++i;
        } else if (c == '\t' || (c == '\n' && style == EscapeStyle::lines)) {
            out += static_cast<char>(c);
            ++i;
        } else if (const std::size_t n = c >= 0x80 ? printable_utf8_length(text, i) : 0; n > 0) {
            out.append(text.substr(i, n));
            i += n;
        } else {
            out += fmt::format("\\x{:02x}", c);
            ++i;
        }
    }
    return out;
}

std::size_t utf8_prefix_length(std::string_view text, std::size_t limit) noexcept {
    if (text.size() <= limit) return text.size();
    std::size_t keep = limit;
    // Back to the start of the character that the cut would split (a continuation byte is 10xxxxxx).
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xc0U) == 0x80U) --keep;
    return keep;
}

std::string quote_value(std::string_view text) {
    constexpr std::size_t shown = 80;
    const std::size_t cut = utf8_prefix_length(text, shown);
    std::string out = "'";
    out += escape_control(text.substr(0, cut), EscapeStyle::quoted);
    if (cut < text.size()) return out + fmt::format("...' ({} bytes)", text.size());
    return out + "'";
}

std::string cut_value(std::string_view text, std::size_t limit) {
    if (text.size() <= limit) return std::string(text);
    const std::size_t keep = utf8_prefix_length(text, limit);
    return fmt::format("{}[... {} more bytes cut; {} in all]", text.substr(0, keep), text.size() - keep, text.size());
}

std::string shown_value(std::string_view text, std::size_t limit) {
    return escape_control(cut_value(text, limit));
}

}  // namespace lockstep::base
