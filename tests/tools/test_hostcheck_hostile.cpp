// Hostile input to `lockstep hostcheck`: text from other machines of any length, hostfiles that ask for absurd
// amounts of work or slots, control sequences from any outside source, and a --max-time that must bound the whole
// run. Some cases run the real program (LOCKSTEP_EXE) with a stand-in for ssh written to a temporary directory.
#define BOOST_TEST_MODULE hostcheck_hostile
#include <boost/test/unit_test.hpp>

#include "hostfile.hpp"
#include "local_checks.hpp"
#include "mpi_launcher/child_process.hpp"
#include "mpi_launcher/display_text.hpp"
#include "mpi_launcher/flavour.hpp"
#include "nodelist.hpp"
#include "probe.hpp"
#include "problem.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace lockstep::hostcheck;
using namespace lockstep::mpi_launcher;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A temporary directory with files in it, removed at the end of the case.
struct Scratch {
    fs::path dir;
    Scratch() {
        std::string pattern = (fs::temp_directory_path() / "lockstep-hostile-XXXXXX").string();
        BOOST_TEST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        dir = pattern;
    }
    ~Scratch() {
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    std::string file(const std::string& name, const std::string& text, bool executable = false) const {
        const fs::path p = dir / name;
        std::ofstream(p, std::ios::binary) << text;
        if (executable) ::chmod(p.c_str(), 0755);
        return p.string();
    }
};

std::string lockstep_exe() {
    const char* exe = std::getenv("LOCKSTEP_EXE");
    BOOST_TEST_REQUIRE((exe != nullptr && *exe != '\0'), "LOCKSTEP_EXE is not set: run this test through meson");
    return exe;
}

CommandResult hostcheck(std::vector<std::string> args) {
    Command c;
    c.argv = {lockstep_exe(), "hostcheck"};
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    c.timeout = 60s;
    c.environment = {{"NO_COLOR", "1"}};
    FanoutOptions options;
    options.output_limit = std::size_t{256} << 20;  // the report of many hosts, whole
    auto r = std::move(run_fanout(std::span<const Command>(&c, 1), options).front());
    BOOST_TEST_REQUIRE((r.ending == CommandResult::Ending::Exited), "lockstep did not exit: " << r.err);
    return r;
}

std::string message_of(const std::string& text, std::optional<HostfileFormat> format = std::nullopt) {
    try {
        (void)parse_hostfile(text, "h", format);
    } catch (const HostfileError& e) {
        return e.what();
    }
    return {};
}

bool has_escape_byte(const std::string& text) {
    return text.find('\x1b') != std::string::npos || text.find('\x07') != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(long_remote_lines_are_read_without_recursion) {
    // libstdc++'s std::regex recursed once per character: 30 000 characters overflowed the stack.
    const std::string line(1'000'000, 'x');
    const auto unknown = parse_mpi_version(line);
    BOOST_TEST((unknown.flavour == MpiFlavour::Unknown));
    BOOST_TEST(unknown.version_text.size() < 300u);
    const auto open_mpi = parse_mpi_version("mpirun (Open MPI) " + line + "\n");
    BOOST_TEST((open_mpi.flavour == MpiFlavour::OpenMpi));
    BOOST_TEST(open_mpi.version.find("more bytes cut") != std::string::npos);
    BOOST_TEST(
        (parse_mpi_version("Intel(R) MPI Library for Linux* OS, Version " + line).flavour == MpiFlavour::IntelMpi));
    BOOST_TEST((parse_mpi_version("HYDRA build details:\n" + std::string(100'000, ' ') + "\n Version: 4.0.2").version ==
                "4.0.2"));
    const auto facts = parse_probe_output(std::string(probe_begin) + "\nversion " + line + "\nhostname " + line + "\n");
    BOOST_TEST_REQUIRE(facts.has_value());
    BOOST_TEST(ssh_port_in("ssh: connect to host n port " + line) == 22);
    BOOST_TEST(ssh_port_in("connect to host n port 99999999999999999999: refused") == 22);
    BOOST_TEST(ssh_port_in("connect to host n port 2222: Connection refused") == 2222);
    BOOST_TEST(key_file_too_open("Permissions 0644 for '" + line + "' are too open.").size() == line.size());
    BOOST_TEST(key_file_too_open(std::string(100'000, '\'')).empty());
    BOOST_TEST(sha256_fingerprint("256 SHA256:" + line + " k").size() == line.size() + 7);
    BOOST_TEST(parse_ssh_config_dump("port 99999999999999999999\n").port == 22);
}

BOOST_AUTO_TEST_CASE(slot_sums_never_wrap) {
    const std::string message = message_of("a slots=2147483647\na slots=2147483647\n");
    BOOST_TEST(message.find("h:2:") != std::string::npos, message);
    BOOST_TEST(message.find("more than 2147483647") != std::string::npos, message);
    // Up to the limit is fine.
    const auto hf = parse_hostfile("a slots=2147483646\na slots=1\n", "h");
    BOOST_TEST(hf.targets[0].openmpi_slots == 2147483647);
}

BOOST_AUTO_TEST_CASE(slot_overflow_is_a_hostfile_error_in_the_json) {
    Scratch s;
    const auto r = hostcheck(
        {"--json", "--skip", "resolve,probe", s.file("h", "a slots=2147483647\na slots=2147483647\nb slots=2\n")});
    BOOST_TEST(r.exit_code == 2);
    const auto doc = nlohmann::json::parse(r.out);
    BOOST_TEST(doc["error"]["kind"] == "hostfile");
    BOOST_TEST(doc["error"]["lines"][0]["line"] == 2);
}

BOOST_AUTO_TEST_CASE(one_budget_of_names_per_file) {
    // Each word alone is under the cap; together they were minutes of work and gigabytes.
    const auto t0 = std::chrono::steady_clock::now();
    const std::string message = message_of("a[1-600000]\nb[1-600000]\nc[1-600000]\n");
    BOOST_TEST(message.find("h:2:") != std::string::npos, message);
    BOOST_TEST(message.find("more than 1000000 hosts") != std::string::npos, message);
    BOOST_TEST(message.find("h:3:") == std::string::npos, message);
    // The bytes of names count too: 200 000 names of 246 characters.
    const std::string long_names = message_of(std::string(240, 'n') + "[000000-199999]\n");
    BOOST_TEST(long_names.find("MiB") != std::string::npos, long_names);
    // One word that multiplies groups is refused before anything is built.
    BOOST_CHECK_THROW((void)expand_nodelist("a[1-999999]b[1-999999]"), NodelistBudgetError);
    // The plain form shares the budget.
    NodelistBudget budget;
    budget.take(max_nodelist_hosts, 10);
    BOOST_CHECK_THROW(budget.take(1, 1), NodelistBudgetError);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 20s));
}

BOOST_AUTO_TEST_CASE(a_host_on_many_lines_is_not_quadratic) {
    std::string text;
    for (int i = 0; i < 5000; ++i) text += "a\n";
    const auto hf = parse_hostfile(text, "h");
    BOOST_TEST(hf.lines.back().openmpi.summary.size() < 300u, hf.lines.back().openmpi.summary.substr(0, 300));
    BOOST_TEST(hf.lines.back().openmpi.summary.find("4991 more") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(long_values_are_cut_in_messages) {
    const std::string word(100'000, 'w');
    for (const std::string& text :
         {"a " + word + "\n", "a slots=" + word + "\n", word + "@a\n", "n[" + word + "]\n", "-" + word + "\n"}) {
        const std::string message = message_of(text);
        BOOST_TEST(!message.empty());
        BOOST_TEST(message.size() < 1500u, message.substr(0, 300));
        BOOST_TEST(message.find("more bytes cut") != std::string::npos, message.substr(0, 300));
    }
    BOOST_TEST(cut_value("short") == "short");
    BOOST_TEST(cut_value(std::string(300, 'x')) == std::string(200, 'x') + "[... 100 more bytes cut; 300 in all]");
}

BOOST_AUTO_TEST_CASE(a_directory_is_not_a_hostfile) {
    Scratch s;
    try {
        (void)read_hostfile(s.dir.string());
        BOOST_FAIL("a directory was read as a hostfile");
    } catch (const HostfileError& e) {
        BOOST_TEST(std::string(e.what()).find("is a directory") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_CASE(control_characters_are_shown_escaped) {
    BOOST_TEST(escape_control("a\x1b[2Jb\x07\r\x7f") == "a\\x1b[2Jb\\x07\\x0d\\x7f");
    BOOST_TEST(escape_control("caf\xc3\xa9 \xc2\x9b \xff") == "caf\xc3\xa9 \\xc2\\x9b \\xff");
    BOOST_TEST(escape_control("1\n2", true) == "1\n2");
    BOOST_TEST(escape_control("1\n2") == "1\\x0a2");

    Scratch s;
    // Hostfile lines: a malformed one (stderr) and a comment shown by --lines (stdout).
    const auto bad = hostcheck({"--skip", "resolve,probe", s.file("bad", "n1\x1b]0;owned\x07 slots=2\n")});
    BOOST_TEST(bad.exit_code == 2);
    BOOST_TEST(!has_escape_byte(bad.err), bad.err);
    BOOST_TEST(bad.err.find("\\x1b]0;owned\\x07") != std::string::npos, bad.err);
    const auto lines =
        hostcheck({"--skip", "resolve,probe", "--lines", s.file("comment", "n1 slots=2 # \x1b[2J\x1b[31mred\n")});
    BOOST_TEST(lines.exit_code == 0);
    BOOST_TEST(!has_escape_byte(lines.out), lines.out);
    BOOST_TEST(lines.out.find("\\x1b[2J") != std::string::npos, lines.out);

    // ssh's error text, and what a node that was reached printed.
    const std::string hosts = s.file("hosts", "refusing\nreached\n");
    const std::string ssh =
        s.file("ssh",
               "#!/bin/sh\n"
               "for a; do last_but_one=$host; host=$a; done\n"
               "if [ \"$last_but_one\" = refusing ]; then\n"
               "  printf 'ssh: \\033[2J\\033]0;owned\\007Connection refused\\n' >&2; exit 255\n"
               "fi\n"
               "printf '%s\\nhostname evil\\033[31m\\npath /bin\\nprogram orted /x\\033[1m\\n%s\\n' "
               "'" +
                   std::string(probe_begin) + "' '" + std::string(probe_end) + "'\n",
               true);
    const auto table = hostcheck({"--skip", "resolve,mesh,mpirun", "--ssh-command", ssh, "--timeout", "5", hosts});
    BOOST_TEST(table.exit_code == 1);
    BOOST_TEST(!has_escape_byte(table.out), table.out);
    BOOST_TEST(table.out.find("\\x1b[2J") != std::string::npos, table.out);
    BOOST_TEST(table.out.find("evil\\x1b[31m") != std::string::npos, table.out);
    // The JSON keeps the exact text, escaped the JSON way.
    const auto json = hostcheck({"--json", "--skip", "resolve,mesh,mpirun", "--ssh-command", ssh, hosts});
    const auto doc = nlohmann::json::parse(json.out);
    BOOST_TEST(doc["hosts"][1]["remote"]["hostname"].get<std::string>() == "evil\x1b[31m");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool under_sanitizer = true;
#else
constexpr bool under_sanitizer = false;
#endif

BOOST_AUTO_TEST_CASE(max_time_bounds_the_whole_run) {
    // Many hosts behind an ssh that never answers: the checks must stop early enough for the report of every host
    // to be written by the bound too.
    Scratch s;
    std::string text;
    // Under a sanitizer a tenth of the hosts: the report's allocations, not the run, would set its pace.
    const int count = under_sanitizer ? 4000 : 40000;
    for (int i = 0; i < count; ++i) text.append("n").append(std::to_string(i)).append("\n");
    const std::string hosts = s.file("hosts", text);
    const std::string ssh = s.file("ssh", "#!/bin/sh\nexec sleep 30\n", true);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = hostcheck({"--json", "--skip", "resolve", "--max-time", "3", "--ssh-command", ssh, hosts});
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    // The bound is the plain build's: under a sanitizer every allocation of the report's entries is several
    // times slower (LeakSanitizer's full unwinding), which is the instrumentation's time, not the run's.
    if (!under_sanitizer) BOOST_TEST(took.count() < 4.0, "took " << took.count() << " s");
    BOOST_TEST(r.exit_code == 1);
    const auto doc = nlohmann::json::parse(r.out);
    BOOST_TEST(doc["hosts"].size() == static_cast<std::size_t>(count));
    const auto& last = doc["hosts"].back();
    BOOST_TEST(last["problem"] == "timeout");
    BOOST_TEST(last["evidence"].get<std::string>().find("not checked") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(nodes_that_all_answer_one_name_are_not_quadratic) {
    // Remote text decides which hosts are one machine: every node answering "same" made every host list every other.
    Scratch s;
    std::string text;
    for (int i = 0; i < 1000; ++i) text.append("n").append(std::to_string(i)).append("\n");
    const std::string hosts = s.file("hosts", text);
    const std::string ssh = s.file("ssh",
                                   "#!/bin/sh\nprintf '%s\\nhostname same\\nprogram orted /x\\n%s\\n' '" +
                                       std::string(probe_begin) + "' '" + std::string(probe_end) + "'\n",
                                   true);
    const auto r = hostcheck({"--json", "--skip", "resolve,mesh,mpirun", "--ssh-command", ssh, hosts});
    BOOST_TEST(r.exit_code == 1);
    const auto doc = nlohmann::json::parse(r.out);
    for (const auto& h : doc["hosts"]) {
        BOOST_TEST(h["problem"] == "same_machine");
        BOOST_TEST(h["same_machine_as"].size() <= 16u);
    }
}
