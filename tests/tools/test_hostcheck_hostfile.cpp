// Hostfile parsing for `lockstep hostcheck`: every form, what OpenMPI and Hydra each make of a line, Slurm node
// lists, and malformed lines reported with file:line and their text.
#define BOOST_TEST_MODULE hostcheck_hostfile
#include <boost/test/unit_test.hpp>

#include "hostfile.hpp"
#include "nodelist.hpp"

#include <string>
#include <vector>

using namespace lockstep::hostcheck;

namespace {

std::vector<std::string> hosts_of(const Hostfile& hf) {
    std::vector<std::string> out;
    for (const auto& t : hf.targets) out.push_back(t.host);
    return out;
}

// The errors a text raises, or an empty list.
std::vector<LineError> errors_of(const std::string& text, std::optional<HostfileFormat> format = std::nullopt) {
    try {
        (void)parse_hostfile(text, "cluster.hosts", format);
    } catch (const HostfileError& e) {
        return e.errors();
    }
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openmpi)

BOOST_AUTO_TEST_CASE(slots_users_comments_and_ipv6) {
    const auto hf = parse_hostfile(
        "# cluster\n"
        "node01 slots=4 max_slots=8\n"
        "\n"
        "alice@node02 slots=2   # the second\n"
        "fd00::15 slots=2\n"
        "[fd00::16] slots = 1\n"
        "10.0.0.7 count=3\n",
        "h");
    BOOST_TEST((hf.format == HostfileFormat::OpenMpi));
    BOOST_TEST(hf.format_detected);
    BOOST_TEST((hosts_of(hf) == std::vector<std::string>{"node01", "node02", "fd00::15", "fd00::16", "10.0.0.7"}));
    BOOST_TEST(hf.lines.size() == 5u);
    BOOST_TEST(hf.lines[0].number == 2);
    BOOST_TEST(*hf.lines[0].hosts[0].slots == 4);
    BOOST_TEST(*hf.lines[0].hosts[0].max_slots == 8);
    BOOST_TEST(*hf.targets[1].user == "alice");
    BOOST_TEST(hf.targets[2].ipv6);
    BOOST_TEST(hf.targets[3].openmpi_slots == 1);
    BOOST_TEST(hf.targets[4].openmpi_slots == 3);
}

BOOST_AUTO_TEST_CASE(duplicates_add_their_slots) {
    const auto hf = parse_hostfile("a slots=4\nb slots=2\na slots=2\nc\nc\n", "h");
    BOOST_TEST(hf.targets.size() == 3u);
    BOOST_TEST(hf.targets[0].openmpi_slots == 6);
    BOOST_TEST((hf.targets[0].lines == std::vector<int>{1, 3}));
    BOOST_TEST(hf.targets[2].openmpi_slots == 2);  // no slots=: one per line
    BOOST_TEST(hf.lines[0].openmpi.summary.find("6 in all with line 3") != std::string::npos);
    BOOST_TEST(hf.lines[2].openmpi.summary.find("6 in all with line 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(hydra_cannot_read_slots_or_ipv6) {
    const auto hf = parse_hostfile("a slots=4\nfd00::1 slots=1\nbob@c slots=1\n", "h");
    BOOST_TEST(!hf.lines[0].hydra.usable);
    BOOST_TEST(hf.lines[0].hydra.summary.find("slots=4") != std::string::npos);
    BOOST_TEST(hf.lines[0].hydra.summary.find("a:4") != std::string::npos);
    BOOST_TEST(!hf.lines[1].hydra.usable);
    BOOST_TEST(hf.lines[1].hydra.summary.find("IPv6") != std::string::npos);
    BOOST_TEST(hf.lines[1].openmpi.usable);
}

BOOST_AUTO_TEST_CASE(localhost_is_this_machine_to_openmpi) {
    const auto hf = parse_hostfile("localhost slots=2\n", "h");
    BOOST_TEST(hf.lines[0].openmpi.summary.find("renames it to this machine's name") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(hydra)

BOOST_AUTO_TEST_CASE(counts_users_and_adjacent_merging) {
    const auto hf = parse_hostfile("a:4\nb:2 user=alice\nb:1\na:2\n", "h");
    BOOST_TEST((hf.format == HostfileFormat::Hydra));
    BOOST_TEST(*hf.lines[0].hosts[0].slots == 4);
    BOOST_TEST(*hf.lines[1].hosts[0].user == "alice");
    BOOST_TEST(hf.lines[0].hydra.summary == "block 1: 4 processes");
    BOOST_TEST(hf.lines[1].hydra.summary == "block 2: 2 processes");
    BOOST_TEST(hf.lines[2].hydra.summary.find("merged into block 2 with line 2 above") != std::string::npos);
    BOOST_TEST(hf.lines[3].hydra.summary.find("block 3") != std::string::npos);
    BOOST_TEST(hf.lines[3].hydra.summary.find("not merged with line 1") != std::string::npos);
    // OpenMPI would read "a:4" as a host name.
    BOOST_TEST(!hf.lines[0].openmpi.usable);
    BOOST_TEST(hf.lines[0].openmpi.summary.find("a slots=4") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(user_keyword_alone_means_hydra) {
    const auto hf = parse_hostfile("a user=bob\nb\n", "h");
    BOOST_TEST((hf.format == HostfileFormat::Hydra));
    BOOST_TEST(*hf.targets[0].user == "bob");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(plain_and_slurm)

BOOST_AUTO_TEST_CASE(plain_one_name_per_line) {
    const auto hf = parse_hostfile("n1\r\nn2\r\n# c\r\nn3.example.org\r\n", "h");
    BOOST_TEST((hf.format == HostfileFormat::Plain));
    BOOST_TEST((hosts_of(hf) == std::vector<std::string>{"n1", "n2", "n3.example.org"}));
    BOOST_TEST(hf.lines[1].number == 2);
}

BOOST_AUTO_TEST_CASE(slurm_lists_expand_with_fixed_width) {
    BOOST_TEST((expand_nodelist("node[01-03,10]") == std::vector<std::string>{"node01", "node02", "node03", "node10"}));
    BOOST_TEST((expand_nodelist("n[8-10]") == std::vector<std::string>{"n8", "n9", "n10"}));
    BOOST_TEST((expand_nodelist("n[098-100]") == std::vector<std::string>{"n098", "n099", "n100"}));
    BOOST_TEST((expand_nodelist("r[1-2]n[1-2]") == std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"}));
    BOOST_TEST((expand_nodelist("a,b[1-2],c") == std::vector<std::string>{"a", "b1", "b2", "c"}));
    BOOST_TEST((expand_nodelist("login") == std::vector<std::string>{"login"}));
    BOOST_CHECK_THROW((void)expand_nodelist("n[1-"), NodelistError);
    BOOST_CHECK_THROW((void)expand_nodelist("n[3-1]"), NodelistError);
    BOOST_CHECK_THROW((void)expand_nodelist("n[a-b]"), NodelistError);
    BOOST_CHECK_THROW((void)expand_nodelist("n[]"), NodelistError);
    BOOST_CHECK_THROW((void)expand_nodelist("n1]"), NodelistError);
    BOOST_CHECK_THROW((void)expand_nodelist("a,,b"), NodelistError);
    BOOST_CHECK_THROW((void)expand_nodelist("n[1-999999999]"), NodelistError);
}

BOOST_AUTO_TEST_CASE(slurm_hostfile) {
    const auto hf = parse_hostfile("node[01-04]\nlogin1,login2\n", "h");
    BOOST_TEST((hf.format == HostfileFormat::Slurm));
    BOOST_TEST(hf.targets.size() == 6u);
    BOOST_TEST(hf.targets[3].host == "node04");
    BOOST_TEST((hf.targets[3].lines == std::vector<int>{1}));
    BOOST_TEST(!hf.lines[0].openmpi.usable);
    BOOST_TEST(hf.lines[0].openmpi.summary.find("scontrol show hostnames 'node[01-04]'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(forced_format_wins) {
    const auto hf = parse_hostfile("n1\nn2\n", "h", HostfileFormat::Hydra);
    BOOST_TEST((hf.format == HostfileFormat::Hydra));
    BOOST_TEST(!hf.format_detected);
}

BOOST_AUTO_TEST_CASE(shipped_examples_parse) {
    const std::string dir = LOCKSTEP_HOSTFILES_DIR;
    BOOST_TEST((read_hostfile(dir + "/openmpi").format == HostfileFormat::OpenMpi));
    BOOST_TEST((read_hostfile(dir + "/hydra").format == HostfileFormat::Hydra));
    BOOST_TEST((read_hostfile(dir + "/plain").format == HostfileFormat::Plain));
    BOOST_TEST((read_hostfile(dir + "/slurm").format == HostfileFormat::Slurm));
    const auto local = read_hostfile(dir + "/localhost");
    BOOST_TEST(local.targets.size() == 1u);
    BOOST_TEST(local.targets[0].host == "localhost");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(malformed)

BOOST_AUTO_TEST_CASE(every_bad_line_is_reported_with_file_line_and_text) {
    const auto errors = errors_of("good slots=1\nbad slots=many\nalso slots=2 colour=red\nx max_slots=1 slots=4\n");
    BOOST_TEST_REQUIRE(errors.size() == 3u);
    BOOST_TEST(errors[0].path == "cluster.hosts");
    BOOST_TEST(errors[0].line == 2);
    BOOST_TEST(errors[0].text == "bad slots=many");
    BOOST_TEST(errors[0].message.find("whole number") != std::string::npos);
    BOOST_TEST(errors[1].line == 3);
    BOOST_TEST(errors[1].message.find("unknown keyword 'colour'") != std::string::npos);
    BOOST_TEST(errors[2].line == 4);
    BOOST_TEST(errors[2].message.find("max_slots=1 is below slots=4") != std::string::npos);
    try {
        (void)parse_hostfile("good\nb@d@host slots=1\n", "cluster.hosts");
        BOOST_FAIL("no error");
    } catch (const HostfileError& e) {
        BOOST_TEST(std::string(e.what()).find("cluster.hosts:2:") == 0u);
        BOOST_TEST(std::string(e.what()).find("'b@d@host slots=1'") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(shell_text_is_never_a_host_name) {
    for (const char* bad : {"node;rm", "$(id)", "`id`", "a|b", "-oProxyCommand=x", "a'b", "a\"b", "a&b"}) {
        const auto errors = errors_of(std::string(bad) + "\n", HostfileFormat::Plain);
        BOOST_TEST_REQUIRE(errors.size() == 1u, bad);
        BOOST_TEST(errors[0].message.find("is not a host name") != std::string::npos, bad);
    }
    BOOST_TEST(!is_valid_host_name("-x"));
    BOOST_TEST(!is_valid_host_name(".x"));
    BOOST_TEST(!is_valid_host_name("a:b"));  // one colon: neither a name nor an IPv6 address
    BOOST_TEST(is_valid_host_name("fe80::1%eth0"));
    BOOST_TEST(is_valid_host_name("node-01.cluster_a"));
    BOOST_TEST(!is_valid_user_name("-l"));
}

BOOST_AUTO_TEST_CASE(form_specific_errors) {
    BOOST_TEST(errors_of("a b\n", HostfileFormat::Plain)[0].message.find("one host per line") != std::string::npos);
    BOOST_TEST(errors_of("fd00::1\n", HostfileFormat::Hydra)[0].message.find("IPv6") != std::string::npos);
    BOOST_TEST(errors_of("a:0\n")[0].message.find("at least 1") != std::string::npos);
    BOOST_TEST(errors_of("a:2 slots=2\n", HostfileFormat::Hydra)[0].message.find("Hydra stops at 'slots=2'") !=
               std::string::npos);
    BOOST_TEST(errors_of("node[1-\n")[0].message.find("never closed") != std::string::npos);
    BOOST_TEST(errors_of("node[3-1]\n")[0].message.find("backwards") != std::string::npos);
    BOOST_TEST(errors_of("^node1\n", HostfileFormat::OpenMpi)[0].message.find("exclusions") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(mixed_forms_are_refused) {
    const auto errors = errors_of("a slots=2\nb:2\n");
    BOOST_TEST_REQUIRE(errors.size() == 1u);
    BOOST_TEST(errors[0].line == 2);
    BOOST_TEST(errors[0].message.find("line 1 is OpenMPI syntax") != std::string::npos);
    BOOST_TEST(errors_of("n[1-2]\nb slots=1\n")[0].message.find("Slurm") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(empty_and_missing_files) {
    const auto errors = errors_of("# nothing\n\n");
    BOOST_TEST_REQUIRE(errors.size() == 1u);
    BOOST_TEST(errors[0].message.find("names no host") != std::string::npos);
    BOOST_CHECK_THROW((void)read_hostfile("/nonexistent/hostfile"), HostfileError);
    BOOST_CHECK_THROW((void)parse_hostfile_format("mvapich"), UsageError);
}

BOOST_AUTO_TEST_SUITE_END()
