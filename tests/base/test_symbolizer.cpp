// The symbolizer: return addresses to "function (file:line)", cached per address. Compiled with -g (meson.build), so
// that this file's own lines are known.
#include <boost/test/unit_test.hpp>

#include <lockstep/base/symbolizer.hpp>

#include <cstdlib>
#include <string>

namespace {

// The address this call returns to, from inside a function the compiler must not inline.
[[gnu::noinline]] const void* return_address_of_this_call() {
    return __builtin_return_address(0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(symbolizer)

BOOST_AUTO_TEST_CASE(names_function_file_and_line_with_debug_information) {
    const void* here = return_address_of_this_call();
    const int line = __LINE__ - 1;
    const std::string site = lockstep::base::describe_call_site(here);
    BOOST_TEST(site.find("test_symbolizer.cpp:" + std::to_string(line)) != std::string::npos, site);
    BOOST_TEST(site.find("names_function_file_and_line_with_debug_information") != std::string::npos, site);
}

BOOST_AUTO_TEST_CASE(caches_each_address) {
    const void* here = return_address_of_this_call();
    const auto& first = lockstep::base::symbolize_return_address(here);
    const auto& second = lockstep::base::symbolize_return_address(here);
    BOOST_TEST(&first == &second);
    BOOST_TEST(!first.module.empty());
}

BOOST_AUTO_TEST_CASE(another_module) {
    // libc: its exported name, with its file and line where its debug information is installed, else its module.
    const void* in_libc = reinterpret_cast<const char*>(&std::abort) + 1;
    const std::string site = lockstep::base::describe_call_site(in_libc);
    BOOST_TEST(site.find("abort") != std::string::npos, site);
    BOOST_TEST(lockstep::base::describe_call_site(nullptr) == "an unknown call site");
}

BOOST_AUTO_TEST_SUITE_END()
