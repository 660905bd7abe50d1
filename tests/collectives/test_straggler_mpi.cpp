// Run under mpirun with 1 and 2 ranks: the straggler report's verdict, and the level it is logged at (INFO while the
// ranks are balanced or alone, WARNING only when the others really wait for one rank).
#define BOOST_TEST_MODULE straggler_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "logging_capture.hpp"
#include "runtime_fixture.hpp"

#include <chrono>
#include <thread>

using namespace lockstep;

namespace {
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// The levels of the straggler report's records this process's console sink received during `report`.
template <typename Report>
std::vector<LogLevel> straggler_levels(Report report) {
    const auto log = get_logger("lockstep.straggler");
    log.set_level(LogLevel::Info);
    lockstep_test::CapturedBlocks captured;
    report();
    log.reset_level();
    std::vector<LogLevel> levels;
    for (const auto& record : captured.records()) {
        if (record.logger == "lockstep.straggler") levels.push_back(record.level);
    }
    return levels;
}
}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(verdict_follows_the_threshold) {
    // One rank: nobody waits.
    BOOST_TEST(!someone_waits({{0, "n1", 10.0, 0.0}}));
    // Balanced: 10 ms apart on a 10 s run.
    BOOST_TEST(!someone_waits({{0, "n1", 10.0, 1.0}, {1, "n1", 10.0, 1.01}}));
    // Above 5 % of the run but under the floor: a short job's jitter.
    BOOST_TEST(!someone_waits({{0, "n1", 2.0, 0.0}, {1, "n1", 2.0, 0.3}}));
    // Above the floor but under 5 % of a long run.
    BOOST_TEST(!someone_waits({{0, "n1", 100.0, 1.0}, {1, "n1", 100.0, 4.0}}));
    // Rank 1 waits least; the others wait 2.6 s more on a 10 s run.
    const std::vector<StragglerRow> slow{{0, "n1", 10.0, 3.0}, {1, "n1", 10.0, 0.2}, {2, "n2", 10.0, 2.8}};
    BOOST_TEST(someone_waits(slow));
    BOOST_TEST(contains(format_straggler_report(slow), "Give it less work"));
    BOOST_TEST(contains(format_straggler_report({{0, "n1", 2.0, 0.0}, {1, "n1", 2.0, 0.3}}), "balanced"));
}

BOOST_AUTO_TEST_CASE(balanced_ranks_report_at_info) {
    Communicator& world = Communicator::world();
    world.barrier();
    const auto levels = straggler_levels([&] { (void)straggler_report(world); });
    if (world.rank() == 0) {
        BOOST_TEST_REQUIRE(levels.size() == 1u);
        BOOST_TEST(static_cast<int>(levels.front()) == static_cast<int>(LogLevel::Info));
    } else {
        BOOST_TEST(levels.empty());  // the main process alone logs it
    }
}

BOOST_AUTO_TEST_CASE(a_rank_the_others_wait_for_is_a_warning) {
    Communicator& world = Communicator::world();
    if (world.size() < 2) return;  // with one rank nobody can wait
    // The last rank computes 1.5 s before the barrier, so every other rank waits that long in it: well above the
    // 0.5 s floor and 5 % of the run.
    if (world.rank() == world.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    world.barrier();
    std::string text;
    const auto levels = straggler_levels([&] { text = straggler_report(world); });
    BOOST_TEST(contains(text, fmt::format("The others wait for rank {}", world.size() - 1)));
    if (world.rank() == 0) {
        BOOST_TEST_REQUIRE(levels.size() == 1u);
        BOOST_TEST(static_cast<int>(levels.front()) == static_cast<int>(LogLevel::Warning));
    }
}
