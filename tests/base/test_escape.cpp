// One escaper for every text that reaches a terminal from outside: a config value, a hostfile line, ssh's words.
#include <boost/test/unit_test.hpp>

#include <lockstep/base/escape.hpp>

#include <string>

namespace base = lockstep::base;
using base::EscapeStyle;

namespace {
// U+0080 + offset as UTF-8: C2 80 ... C2 9F.
std::string utf8_c1(int offset) {
    return std::string{'\xc2', static_cast<char>(0x80 + offset)};
}
std::string hex(int byte) {
    static constexpr char digits[] = "0123456789abcdef";
    return std::string("\\x") + digits[byte >> 4] + digits[byte & 15];
}
}  // namespace

BOOST_AUTO_TEST_SUITE(escape)

BOOST_AUTO_TEST_CASE(c0_controls_and_del_are_escaped) {
    for (int c = 0; c < 0x20; ++c) {
        if (c == '\t' || c == '\n') continue;
        BOOST_TEST(base::escape_control(std::string(1, static_cast<char>(c))) == hex(c), c);
        BOOST_TEST(base::escape_control(std::string(1, static_cast<char>(c)), EscapeStyle::quoted) == hex(c), c);
    }
    BOOST_TEST(base::escape_control("\x7f") == "\\x7f");
    BOOST_TEST(base::escape_control("a\x1b[2Jb\x07\r") == "a\\x1b[2Jb\\x07\\x0d");
}

BOOST_AUTO_TEST_CASE(c1_controls_are_escaped_as_raw_bytes_and_as_utf8) {
    for (int offset = 0; offset < 0x20; ++offset) {
        const int byte = 0x80 + offset;
        // A lone byte 0x80-0x9f is no UTF-8 at all; encoded as UTF-8 it is a C1 control, which terminals may obey.
        BOOST_TEST(base::escape_control(std::string(1, static_cast<char>(byte))) == hex(byte), byte);
        BOOST_TEST(base::escape_control(utf8_c1(offset)) == "\\xc2" + hex(byte), byte);
        BOOST_TEST(base::escape_control(utf8_c1(offset), EscapeStyle::quoted) == "\\xc2" + hex(byte), byte);
    }
}

BOOST_AUTO_TEST_CASE(csi_in_every_spelling_is_escaped) {
    BOOST_TEST(base::escape_control("\x1b[31mred") == "\\x1b[31mred");  // ESC [
    BOOST_TEST(base::escape_control("\x9b"
                                    "31mred") == "\\x9b31mred");  // the 8-bit CSI
    BOOST_TEST(base::escape_control("\xc2\x9b"
                                    "31mred") == "\\xc2\\x9b31mred");              // U+009B
    BOOST_TEST(base::escape_control("\x1b]0;title\x07") == "\\x1b]0;title\\x07");  // OSC, retitles a window
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_escaped_and_valid_utf8_kept) {
    BOOST_TEST(base::escape_control("caf\xc3\xa9") == "caf\xc3\xa9");
    BOOST_TEST(base::escape_control("\xe2\x82\xac \xf0\x9f\x98\x80") == "\xe2\x82\xac \xf0\x9f\x98\x80");
    BOOST_TEST(base::escape_control("\xff") == "\\xff");
    BOOST_TEST(base::escape_control("\xc3") == "\\xc3");                             // truncated
    BOOST_TEST(base::escape_control("\xc3(") == "\\xc3(");                           // bad continuation
    BOOST_TEST(base::escape_control("\xc0\xaf") == "\\xc0\\xaf");                    // overlong '/'
    BOOST_TEST(base::escape_control("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");           // overlong, three bytes
    BOOST_TEST(base::escape_control("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // a surrogate
    BOOST_TEST(base::escape_control("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

BOOST_AUTO_TEST_CASE(tab_and_newline_as_the_style_says) {
    BOOST_TEST(base::escape_control("a\tb\nc") == "a\tb\\x0ac");
    BOOST_TEST(base::escape_control("a\tb\nc", EscapeStyle::lines) == "a\tb\nc");
    BOOST_TEST(base::escape_control("a\tb\nc", EscapeStyle::quoted) == "a\\tb\\nc");
    BOOST_TEST(base::escape_control("back\\slash") == "back\\slash");
}

BOOST_AUTO_TEST_CASE(quote_value_quotes_escapes_and_cuts) {
    BOOST_TEST(base::quote_value("30") == "'30'");
    BOOST_TEST(base::quote_value("loud\x1b[31m\nfake\t\x7f\xc2\x9b") == "'loud\\x1b[31m\\nfake\\t\\x7f\\xc2\\x9b'");
    const std::string long_value(100, 'x');
    BOOST_TEST(base::quote_value(long_value) == "'" + std::string(80, 'x') + "...' (100 bytes)");
    // The cut never leaves half a character: 79 x and a two-byte é straddling byte 80.
    const std::string straddling = std::string(79, 'x') + "\xc3\xa9" + std::string(10, 'y');
    BOOST_TEST(base::quote_value(straddling) == "'" + std::string(79, 'x') + "...' (91 bytes)");
}

BOOST_AUTO_TEST_CASE(cut_and_shown_values) {
    BOOST_TEST(base::utf8_prefix_length("abc", 10) == 3u);
    BOOST_TEST(base::utf8_prefix_length("ab\xc3\xa9", 3) == 2u);
    BOOST_TEST(base::cut_value("short") == "short");
    BOOST_TEST(base::cut_value(std::string(10, 'a'), 4) == "aaaa[... 6 more bytes cut; 10 in all]");
    BOOST_TEST(base::shown_value("a\x1b" + std::string(8, 'b'), 4) == "a\\x1bbb[... 6 more bytes cut; 10 in all]");
}

BOOST_AUTO_TEST_SUITE_END()
