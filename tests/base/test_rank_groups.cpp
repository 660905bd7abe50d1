// The one formatter of ranks grouped by value: "Processes 0-2, 5: value".
#include <boost/test/unit_test.hpp>

#include <lockstep/base/rank_groups.hpp>

#include <string>
#include <vector>

namespace base = lockstep::base;

BOOST_AUTO_TEST_SUITE(rank_groups)

BOOST_AUTO_TEST_CASE(ranks_as_ascending_ranges) {
    BOOST_TEST(base::format_rank_ranges({}) == "");
    BOOST_TEST(base::format_rank_ranges({3}) == "3");
    BOOST_TEST(base::format_rank_ranges({5, 0, 1, 2, 7, 9, 8}) == "0-2, 5, 7-9");
    BOOST_TEST(base::format_rank_ranges({1, 2, 4}) == "1-2, 4");
    BOOST_TEST(base::processes_text({}) == "none");
    BOOST_TEST(base::processes_text({4}) == "Process 4");
    BOOST_TEST(base::processes_text({2, 1, 4}) == "Processes 1-2, 4");
    BOOST_TEST(base::count_text(1, "process", "processes") == "1 process");
    BOOST_TEST(base::count_text(0, "process", "processes") == "0 processes");
}

BOOST_AUTO_TEST_CASE(ranks_grouped_by_value_in_order_of_their_lowest_rank) {
    const std::vector<std::vector<int>> groups = base::ranks_by_value(std::vector<int>{7, 3, 7, 7, 3, 1});
    BOOST_TEST(groups.size() == 3u);
    BOOST_TEST(groups[0] == (std::vector<int>{0, 2, 3}));
    BOOST_TEST(groups[1] == (std::vector<int>{1, 4}));
    BOOST_TEST(groups[2] == (std::vector<int>{5}));
    BOOST_TEST(base::ranks_by_value(std::vector<int>{}).empty());
    BOOST_TEST(base::grouped_by_value({"a", "b", "a", "a"}) == "  - Processes 0, 2-3: a\n  - Process 1: b\n");
    BOOST_TEST(base::grouped_by_value({}) == "");
}

BOOST_AUTO_TEST_SUITE_END()
