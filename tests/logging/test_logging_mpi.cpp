// Run under mpirun with 2, 3 and 4 ranks. The cases run in order on every rank: the first logs before the runtime
// is initialised and then initialises it; the last finalises it and logs after. What rank 0 writes for the job is
// read back from a Boost.Log sink on the console route (what lockstep's stderr sink receives); per-rank files are
// read back from disk.
#define BOOST_TEST_MODULE logging_mpi
#include <boost/test/unit_test.hpp>

#include "logging_capture.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

using lockstep::LogLevel;
using lockstep::LogRecord;
using lockstep_test::CapturedBlocks;

namespace {

struct FinalizeAtExit {
    ~FinalizeAtExit() { lockstep::Runtime::finalize(); }
};

int world_rank() {
    return lockstep::Runtime::get().identity().rank;
}
int world_size() {
    return lockstep::Runtime::get().identity().size;
}
MPI_Comm world() {
    return lockstep::Runtime::get().comm();
}

int sum_over_ranks(int value) {
    int total = 0;
    MPI_Allreduce(&value, &total, 1, MPI_INT, MPI_SUM, world());
    return total;
}

// A folder every rank sees: rank 0 makes it and broadcasts its name.
std::filesystem::path shared_directory() {
    std::string path;
    if (world_rank() == 0) {
        std::string pattern = (std::filesystem::temp_directory_path() / "lockstep-logging-mpi-XXXXXX").string();
        BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    int length = static_cast<int>(path.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, world());
    path.resize(static_cast<std::size_t>(length));
    MPI_Bcast(path.data(), length, MPI_CHAR, 0, world());
    return path;
}

void remove_shared_directory(const std::filesystem::path& path) {
    MPI_Barrier(world());
    if (world_rank() == 0) std::filesystem::remove_all(path);
}

std::vector<int> ranks_of(const lockstep::LogBlock& block) {
    std::vector<int> ranks;
    for (const auto& r : block) ranks.push_back(r.rank);
    return ranks;
}

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(FinalizeAtExit);

BOOST_AUTO_TEST_CASE(before_init_records_carry_the_launcher_identity) {
    BOOST_REQUIRE(!lockstep::Runtime::initialized());
    const int rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK"));
    const int size = std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE"));
    {
        CapturedBlocks captured;
        const auto log = lockstep::get_logger("before-init", LogLevel::Info);
        log.info("main only");
        log.info(lockstep::every_rank, "rank {}", rank);
        const auto records = captured.records();
        BOOST_REQUIRE_EQUAL(records.size(), rank == 0 ? 2u : 1u);
        BOOST_TEST(records.back().message == "rank " + std::to_string(rank));
        for (const auto& r : records) {
            BOOST_TEST(r.rank == rank);
            BOOST_TEST(r.size == size);
        }
    }
    lockstep::Runtime::init();
    BOOST_TEST(world_size() == size);
}

BOOST_AUTO_TEST_CASE(main_process_only_by_default) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("main-only", LogLevel::Info);
    log.info("from every rank's code, written once");
    LOCKSTEP_LOG_INFO(log) << "stream style, written once";
    const auto records = captured.records();
    BOOST_TEST(records.size() == (world_rank() == 0 ? 2u : 0u));
    for (const auto& r : records) BOOST_TEST(r.rank == 0);
    BOOST_TEST(sum_over_ranks(static_cast<int>(records.size())) == 2);
}

BOOST_AUTO_TEST_CASE(every_rank_emits_its_own_record) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("every-rank", LogLevel::Info);
    log.info(lockstep::every_rank, "hello from {}", world_rank());
    const auto records = captured.records();
    BOOST_REQUIRE_EQUAL(records.size(), 1u);
    BOOST_TEST(records[0].rank == world_rank());
    BOOST_TEST(records[0].size == world_size());
    BOOST_TEST(records[0].message == "hello from " + std::to_string(world_rank()));
    BOOST_TEST(sum_over_ranks(1) == world_size());
}

BOOST_AUTO_TEST_CASE(in_order_blocks_stay_in_rank_order_whatever_the_arrival_order) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("in-order", LogLevel::Info);
    std::mt19937 random(static_cast<unsigned>(1234 + 97 * world_rank()));
    std::uniform_int_distribution<int> delay_ms(0, 25);
    constexpr int rounds = 8;
    for (int round = 0; round < rounds; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(random)));
        if (round % 2 == 0) {
            log.info(lockstep::in_rank_order, "round {} from rank {}", round, world_rank());
        } else {
            LOCKSTEP_LOG_INFO(log, lockstep::in_rank_order) << "round " << round << " from rank " << world_rank();
        }
    }
    const auto blocks = captured.blocks();
    if (world_rank() != 0) {
        BOOST_TEST(blocks.empty());  // only the writer prints in-order blocks
        return;
    }
    BOOST_REQUIRE_EQUAL(blocks.size(), static_cast<std::size_t>(rounds));
    for (int round = 0; round < rounds; ++round) {
        const auto& block = blocks[static_cast<std::size_t>(round)];
        BOOST_REQUIRE_EQUAL(block.size(), static_cast<std::size_t>(world_size()));
        for (int r = 0; r < world_size(); ++r) {
            const LogRecord& record = block[static_cast<std::size_t>(r)];
            BOOST_TEST(record.rank == r);
            BOOST_TEST(record.size == world_size());
            BOOST_TEST(record.logger == "in-order");
            BOOST_TEST(record.host == lockstep::host_name());
            BOOST_TEST(record.message == fmt::format("round {} from rank {}", round, r));
        }
    }
}

BOOST_AUTO_TEST_CASE(different_levels_on_different_ranks_do_not_deadlock) {
    CapturedBlocks captured;
    const int rank = world_rank();
    const int size = world_size();
    const auto log = lockstep::get_logger("levels");

    // Odd ranks filter INFO; even ranks pass it.
    log.set_level(rank % 2 == 1 ? LogLevel::Error : LogLevel::Debug);
    log.info(lockstep::in_rank_order, "info from {}", rank);
    // The writer itself filters; the others pass.
    log.set_level(rank == 0 ? LogLevel::Critical : LogLevel::Debug);
    LOCKSTEP_LOG_WARNING(log, lockstep::in_rank_order) << "warning from " << rank;
    // Everyone filters: nothing is written, and nobody waits.
    log.set_level(LogLevel::Critical);
    log.error(lockstep::in_rank_order, "filtered everywhere");
    // Every rank passes again.
    log.set_level(LogLevel::Debug);
    log.debug(lockstep::in_rank_order, "debug from {}", rank);

    const auto blocks = captured.blocks();
    if (rank != 0) {
        BOOST_TEST(blocks.empty());
        return;
    }
    std::vector<int> even;
    std::vector<int> not_writer;
    std::vector<int> all;
    for (int r = 0; r < size; ++r) {
        if (r % 2 == 0) even.push_back(r);
        if (r != 0) not_writer.push_back(r);
        all.push_back(r);
    }
    BOOST_REQUIRE_EQUAL(blocks.size(), 3u);
    BOOST_TEST(ranks_of(blocks[0]) == even, boost::test_tools::per_element());
    BOOST_TEST(ranks_of(blocks[1]) == not_writer, boost::test_tools::per_element());
    BOOST_TEST(ranks_of(blocks[2]) == all, boost::test_tools::per_element());
    BOOST_TEST(blocks[1].front().message == "warning from 1");
    BOOST_TEST((blocks[1].front().level == LogLevel::Warning));
    BOOST_TEST((blocks[2].back().level == LogLevel::Debug));
}

BOOST_AUTO_TEST_CASE(warning_once_in_order_still_meets_the_other_ranks) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("once-in-order", LogLevel::Info);
    log.warning_once(lockstep::in_rank_order, "same text");
    log.warning_once(lockstep::in_rank_order, "same text");
    // Only rank 0 has seen this text before: it sends nothing, the others send theirs.
    if (world_rank() == 0) log.warning_once("only rank 0 {}", "knows");
    log.warning_once(lockstep::in_rank_order, "only rank 0 {}", "knows");
    const auto blocks = captured.blocks();
    if (world_rank() != 0) {
        BOOST_TEST(blocks.empty());
        return;
    }
    BOOST_REQUIRE_EQUAL(blocks.size(), 3u);
    BOOST_TEST(blocks[0].size() == static_cast<std::size_t>(world_size()));
    BOOST_TEST(blocks[1].size() == 1u);  // rank 0's own main-process record
    BOOST_TEST(blocks[1].front().rank == 0);
    BOOST_TEST(blocks[2].size() == static_cast<std::size_t>(world_size() - 1));
    BOOST_TEST(blocks[2].front().rank == 1);
}

BOOST_AUTO_TEST_CASE(a_long_in_order_record_is_gathered_whole) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("long", LogLevel::Info);
    const std::string payload(100000 + 1000 * world_rank(), static_cast<char>('a' + world_rank()));
    log.info(lockstep::in_rank_order, "{}", payload);
    if (world_rank() != 0) return;
    const auto blocks = captured.blocks();
    BOOST_REQUIRE_EQUAL(blocks.size(), 1u);
    BOOST_REQUIRE_EQUAL(blocks[0].size(), static_cast<std::size_t>(world_size()));
    for (int r = 0; r < world_size(); ++r) {
        BOOST_TEST(blocks[0][r].message == std::string(100000 + 1000 * r, static_cast<char>('a' + r)));
    }
}

BOOST_AUTO_TEST_CASE(per_rank_files_hold_each_rank_s_own_records) {
    const auto dir = shared_directory();
    const int rank = world_rank();
    const int size = world_size();
    lockstep::configure_logging({.console = true, .directory = dir.string()});
    const auto log = lockstep::get_logger("files", LogLevel::Info);
    log.info("main only record");
    log.info(lockstep::every_rank, "every rank record from {}", rank);
    log.info(lockstep::in_rank_order, "in-order record from {}", rank);
    log.debug(lockstep::every_rank, "filtered record");
    MPI_Barrier(world());

    const auto lines = lockstep_test::read_lines(dir / fmt::format("rank-{}.log", rank));
    std::vector<std::string> expected;
    if (rank == 0) expected.push_back("files: main only record");
    expected.push_back(fmt::format("files: every rank record from {}", rank));
    expected.push_back(fmt::format("files: in-order record from {}", rank));
    BOOST_REQUIRE_EQUAL(lines.size(), expected.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
        BOOST_TEST(
            lines[i].find(fmt::format("[rank {}/{} {}] ", rank, size, lockstep::host_name())) != std::string::npos,
            lines[i]);
        BOOST_TEST(lines[i].ends_with(expected[i]), lines[i]);
    }
    if (rank == 0) {
        int files = 0;
        for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
        BOOST_TEST(files == size);
    }
    lockstep::configure_logging(lockstep::logging_options_from_environment());
    remove_shared_directory(dir);
}

BOOST_AUTO_TEST_CASE(json_lines_parse_on_every_rank) {
    const auto dir = shared_directory();
    const int rank = world_rank();
    const int size = world_size();
    lockstep::configure_logging({.console = true, .directory = dir.string(), .format = lockstep::LogFormat::Json});
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("json", LogLevel::Info);
    log.warning(lockstep::every_rank, "rank {} says \"hi\"", rank);
    log.info(lockstep::in_rank_order, "ordered {}", rank);
    MPI_Barrier(world());

    if (rank == 0) {
        for (int r = 0; r < size; ++r) {
            const auto lines = lockstep_test::read_lines(dir / fmt::format("rank-{}.jsonl", r));
            BOOST_REQUIRE_EQUAL(lines.size(), 2u);
            const auto first = nlohmann::json::parse(lines[0]);
            const auto second = nlohmann::json::parse(lines[1]);
            BOOST_TEST(first.at("message").get<std::string>() == fmt::format("rank {} says \"hi\"", r));
            BOOST_TEST(first.at("level").get<std::string>() == "WARNING");
            BOOST_TEST(second.at("message").get<std::string>() == fmt::format("ordered {}", r));
            for (const auto& json : {first, second}) {
                BOOST_TEST(json.at("rank").get<int>() == r);
                BOOST_TEST(json.at("size").get<int>() == size);
                BOOST_TEST(json.at("logger").get<std::string>() == "json");
                BOOST_TEST(json.at("host").get<std::string>() == lockstep::host_name());
            }
        }
        // The in-order block as JSON lines, in rank order.
        const auto blocks = captured.blocks();
        BOOST_REQUIRE_EQUAL(blocks.size(), 2u);
        BOOST_REQUIRE_EQUAL(blocks[1].size(), static_cast<std::size_t>(size));
        for (int r = 0; r < size; ++r) {
            BOOST_TEST(nlohmann::json::parse(lockstep::format_json(blocks[1][r])).at("rank").get<int>() == r);
        }
    }
    lockstep::configure_logging(lockstep::logging_options_from_environment());
    remove_shared_directory(dir);
}

BOOST_AUTO_TEST_CASE(after_finalize_in_order_falls_back_to_local_records) {
    lockstep::Runtime::finalize();
    int finalized = 0;
    MPI_Finalized(&finalized);
    BOOST_REQUIRE(finalized == 1);
    const int rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK"));
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("after-finalize", LogLevel::Info);
    log.info(lockstep::in_rank_order, "late record from {}", rank);
    log.info(lockstep::every_rank, "late every-rank record from {}", rank);
    int own = 0;
    int warnings = 0;
    for (const auto& r : captured.records()) {
        if (r.logger == "lockstep.logging") {
            ++warnings;
        } else {
            ++own;
            BOOST_TEST(r.rank == rank);
        }
    }
    BOOST_TEST(own == 2);
    BOOST_TEST(warnings == (rank == 0 ? 1 : 0));
}
