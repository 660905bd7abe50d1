// Launches test_logging_order_job under mpirun and reads the job's stderr as the launcher merged it: the in-order lines
// come in rank order within each round and round after round, the main-process line appears once (from rank 0), the
// every-rank line once per rank, and nothing is coloured (stderr is a file). With 2, 3 and 4 ranks in text, and with
// 3 ranks set up only through the environment (LOCKSTEP_LOG_FORMAT=json, LOCKSTEP_LOG_DIR), where every line of
// stderr and of each rank's file must parse as JSON.
// Arguments after "--": the job's path and mpirun's path.
#define BOOST_TEST_MODULE logging_order
#include <boost/test/unit_test.hpp>

#include "logging_capture.hpp"

#include <fmt/format.h>
#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace bp = boost::process;

namespace {

constexpr int rounds = 6;  // as in test_logging_order_job

std::string launch(int ranks, const std::map<std::string, std::string>& variables, const std::filesystem::path& dir) {
    const auto& suite = boost::unit_test::framework::master_test_suite();
    BOOST_REQUIRE_MESSAGE(suite.argc >= 3, "usage: test_logging_order -- JOB MPIRUN");
    const std::string job = suite.argv[1];
    const std::string mpirun = suite.argv[2];
    const std::string out_path = (dir / "stdout.txt").string();
    const std::string err_path = (dir / "stderr.txt").string();
    // The variables go into this process's own environment, which the child inherits, for as long as the launch
    // takes. Not through bp::environment: its lookup in Boost 1.74 reads past the end of a shorter variable
    // (AddressSanitizer: heap-buffer-overflow in basic_environment_impl::find).
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    for (const auto& [name, value] : variables) {
        const char* old = std::getenv(name.c_str());
        saved.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    struct Restore {
        const decltype(saved)& variables;
        ~Restore() {
            for (const auto& [name, old] : variables) {
                if (old)
                    ::setenv(name.c_str(), old->c_str(), 1);
                else
                    ::unsetenv(name.c_str());
            }
        }
    } restore{saved};
    // mpirun's own --timeout ends a hung job cleanly; the wait below is the backstop for mpirun itself.
    bp::child child(mpirun, "-n", std::to_string(ranks), "--oversubscribe", "--timeout", "60", job,
                    bp::std_out > out_path, bp::std_err > err_path, bp::std_in < bp::null);
    if (!child.wait_for(std::chrono::seconds(90))) {
        ::kill(child.id(), SIGTERM);
        if (!child.wait_for(std::chrono::seconds(10))) child.terminate();
        BOOST_FAIL("mpirun with " << ranks << " ranks did not finish within 90 s");
    }
    const std::string err = lockstep_test::read_file(err_path);
    BOOST_TEST_REQUIRE(child.exit_code() == 0, "job failed; its stderr:\n" << err);
    return err;
}

struct Line {
    int rank;
    int size;
    std::string message;
};

// The job's records among the lines of stderr (the launcher may add its own lines).
std::vector<Line> text_lines(const std::string& err) {
    const std::regex pattern(R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO  \[rank (\d+)/(\d+) [^\]]+\] job: (.*)$)");
    std::vector<Line> lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_match(line, m, pattern)) lines.push_back({std::stoi(m[1]), std::stoi(m[2]), m[3]});
    }
    return lines;
}

std::vector<Line> json_lines(const std::vector<std::string>& raw) {
    std::vector<Line> lines;
    for (const std::string& line : raw) {
        if (line.empty() || line.front() != '{') continue;
        const auto json = nlohmann::json::parse(line);  // throws, failing the test, if a record is not valid JSON
        BOOST_TEST(json.at("level").get<std::string>() == "INFO");
        if (json.at("logger").get<std::string>() != "job") continue;
        lines.push_back(
            {json.at("rank").get<int>(), json.at("size").get<int>(), json.at("message").get<std::string>()});
    }
    return lines;
}

void check_records(const std::vector<Line>& lines, int ranks) {
    std::vector<std::string> ordered;
    std::vector<int> ordered_rank;
    int main_only = 0;
    std::multiset<int> every_rank;
    for (const Line& line : lines) {
        BOOST_TEST(line.size == ranks);
        if (line.message.starts_with("ordered: ")) {
            ordered.push_back(line.message);
            ordered_rank.push_back(line.rank);
        } else if (line.message == "main only") {
            ++main_only;
            BOOST_TEST(line.rank == 0);
        } else if (line.message.starts_with("every rank ")) {
            BOOST_TEST(line.message == "every rank " + std::to_string(line.rank));
            every_rank.insert(line.rank);
        }
    }
    std::vector<std::string> expected;
    for (int round = 0; round < rounds; ++round) {
        for (int r = 0; r < ranks; ++r) expected.push_back(fmt::format("ordered: round {} rank {}", round, r));
    }
    BOOST_TEST(ordered == expected, boost::test_tools::per_element());
    // The record of rank r in a block says rank r: the writer prints the other ranks' identities, not its own.
    for (std::size_t i = 0; i < ordered_rank.size(); ++i) {
        BOOST_TEST(ordered_rank[i] == static_cast<int>(i % static_cast<std::size_t>(ranks)));
    }
    BOOST_TEST(main_only == 1);
    std::multiset<int> all;
    for (int r = 0; r < ranks; ++r) all.insert(r);
    BOOST_TEST(every_rank == all, boost::test_tools::per_element());
}

void check_text_job(int ranks) {
    lockstep_test::TemporaryDirectory dir;
    const std::string err = launch(ranks, {}, dir.path());
    BOOST_TEST(err.find('\033') == std::string::npos);
    check_records(text_lines(err), ranks);
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_ranks) {
    check_text_job(2);
}
BOOST_AUTO_TEST_CASE(three_ranks) {
    check_text_job(3);
}
BOOST_AUTO_TEST_CASE(four_ranks) {
    check_text_job(4);
}

BOOST_AUTO_TEST_CASE(json_lines_and_rank_files_from_the_environment) {
    constexpr int ranks = 3;
    lockstep_test::TemporaryDirectory dir;
    const auto logs = dir.path() / "logs";
    std::istringstream err(
        launch(ranks, {{"LOCKSTEP_LOG_FORMAT", "JSON"}, {"LOCKSTEP_LOG_DIR", logs.string()}}, dir.path()));
    std::vector<std::string> err_lines;
    for (std::string line; std::getline(err, line);) err_lines.push_back(line);
    check_records(json_lines(err_lines), ranks);

    for (int r = 0; r < ranks; ++r) {
        const auto file = logs / fmt::format("rank-{}.jsonl", r);
        BOOST_TEST_REQUIRE(std::filesystem::exists(file), file);
        const auto raw = lockstep_test::read_lines(file);
        const auto lines = json_lines(raw);
        BOOST_TEST(lines.size() == raw.size());  // every line of a rank's file is one of its records
        // main only (rank 0), every rank, then per round a noise record and this rank's in-order record.
        BOOST_TEST(lines.size() == static_cast<std::size_t>((r == 0 ? 2 : 1) + 2 * rounds));
        for (const Line& line : lines) BOOST_TEST(line.rank == r);
    }
}
