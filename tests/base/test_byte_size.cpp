// Byte counts as people write and read them.
#include <boost/test/unit_test.hpp>

#include <lockstep/base/byte_size.hpp>

#include <cstddef>
#include <limits>
#include <string>

namespace base = lockstep::base;

BOOST_AUTO_TEST_SUITE(byte_size)

BOOST_AUTO_TEST_CASE(formats_with_binary_units_cut_to_two_decimals) {
    BOOST_TEST(base::format_bytes(0) == "0 B");
    BOOST_TEST(base::format_bytes(1023) == "1023 B");
    BOOST_TEST(base::format_bytes(1024) == "1.00 KiB");
    BOOST_TEST(base::format_bytes(1536) == "1.50 KiB");
    BOOST_TEST(base::format_bytes(2047) == "1.99 KiB");  // cut, not rounded up
    BOOST_TEST(base::format_bytes(std::size_t{2} << 30) == "2.00 GiB");
    BOOST_TEST(base::format_bytes(std::numeric_limits<std::size_t>::max()) == "15.99 EiB");
}

BOOST_AUTO_TEST_CASE(parses_numbers_with_units) {
    BOOST_TEST(base::parse_bytes("1048576").value() == 1048576u);
    BOOST_TEST(base::parse_bytes(" 512 MiB ").value() == std::size_t{512} << 20);
    BOOST_TEST(base::parse_bytes("64k").value() == 65536u);
    BOOST_TEST(base::parse_bytes("2gib").value() == std::size_t{2} << 30);
    BOOST_TEST(base::parse_bytes("1.5GB").value() == 1500000000u);
    BOOST_TEST(base::parse_bytes("0.5KiB").value() == 512u);
    BOOST_TEST(base::parse_bytes("18446744073709551615").value() == std::numeric_limits<std::size_t>::max());
}

BOOST_AUTO_TEST_CASE(every_printed_size_reads_back) {
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1000}, std::size_t{1} << 20, std::size_t{3} << 40}) {
        const auto read_back = base::parse_bytes(base::format_bytes(bytes));
        BOOST_TEST(read_back.has_value());
        BOOST_TEST(*read_back <= bytes);
    }
}

BOOST_AUTO_TEST_CASE(says_why_a_size_is_refused) {
    std::string why;
    BOOST_TEST(!base::parse_bytes("", &why).has_value());
    BOOST_TEST(why == "no number");
    BOOST_TEST(!base::parse_bytes("1.2.3", &why).has_value());
    BOOST_TEST(why == "no number");
    BOOST_TEST(!base::parse_bytes("12 parsecs", &why).has_value());
    BOOST_TEST(why == "unknown unit 'parsecs'");
    BOOST_TEST(!base::parse_bytes("16EiB", &why).has_value());
    BOOST_TEST(why == "more than 18446744073709551615 bytes");
    BOOST_TEST(!base::parse_bytes("18446744073709551616", &why).has_value());
    BOOST_TEST(!base::parse_bytes("1e300 GB").has_value());  // no `why` asked for
}

BOOST_AUTO_TEST_SUITE_END()
