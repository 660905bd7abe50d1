// One rule for every suggestion: the command line's commands and options, and config.yaml's keys.
#include <boost/test/unit_test.hpp>

#include <lockstep/base/edit_distance.hpp>

#include <string>
#include <vector>

namespace base = lockstep::base;

BOOST_AUTO_TEST_SUITE(edit_distance)

BOOST_AUTO_TEST_CASE(a_swap_of_neighbours_is_one_edit) {
    BOOST_TEST(base::edit_distance("", "") == 0u);
    BOOST_TEST(base::edit_distance("timeout", "timeout") == 0u);
    BOOST_TEST(base::edit_distance("", "env") == 3u);
    BOOST_TEST(base::edit_distance("env", "") == 3u);
    BOOST_TEST(base::edit_distance("timout", "timeout") == 1u);
    BOOST_TEST(base::edit_distance("timeuot", "timeout") == 1u);
    BOOST_TEST(base::edit_distance("tset", "test") == 1u);
    BOOST_TEST(base::edit_distance("kitten", "sitting") == 3u);
    BOOST_TEST(base::edit_distance("ca", "abc") == 3u);  // optimal string alignment: no edit of a swapped pair
    BOOST_TEST(base::edit_distance("abcdef", "badcfe") == 3u);
}

BOOST_AUTO_TEST_CASE(nearest_follows_one_rule) {
    const std::vector<std::string> keys{"lockstep", "debug", "log_level", "timeout", "seed", "shm", "shm_threshold"};
    BOOST_TEST(base::nearest("timout", keys).value() == "timeout");
    BOOST_TEST(base::nearest("timeuot", keys).value() == "timeout");
    BOOST_TEST(base::nearest("dbug", keys).value() == "debug");
    BOOST_TEST(base::nearest("log-level", keys).value() == "log_level");
    BOOST_TEST(base::nearest("time", keys).value() == "timeout");  // the only key it begins
    BOOST_TEST(base::nearest("sh", keys).value() == "shm");        // one edit
    BOOST_TEST(!base::nearest("lo", keys).has_value());            // too short to be a prefix
    BOOST_TEST(base::nearest("shm_", keys).value() == "shm");
    BOOST_TEST(base::nearest("sed", {"set", "seed"}).value() == "set");  // a tie goes to the first candidate
    // Two edits are allowed from five characters on, one below.
    BOOST_TEST(base::nearest("debgu", keys).value() == "debug");
    BOOST_TEST(!base::nearest("dbg", keys).has_value());
    BOOST_TEST(base::nearest("shm_thresold", keys).value() == "shm_threshold");
    // Never every character changed, and never a long word.
    BOOST_TEST(!base::nearest("x", {"y"}).has_value());
    BOOST_TEST(!base::nearest("ab", {"cd", "abcd"}).has_value());
    BOOST_TEST(!base::nearest(std::string(65, 'a'), {std::string(65, 'a')}).has_value());
    BOOST_TEST(!base::nearest(std::string(1 << 20, 'a'), keys).has_value());
    BOOST_TEST(base::nearest(std::string(64, 'a'), {std::string(63, 'a')}).value() == std::string(63, 'a'));
    // An ambiguous prefix names nothing.
    BOOST_TEST(!base::nearest("shm_t", {"shm_threshold", "shm_tuning"}).has_value());
    BOOST_TEST(!base::nearest("anything", {}).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
