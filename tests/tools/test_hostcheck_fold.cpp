// Folding host names into Slurm node lists (the inverse of the node-list parser), the grouping of alike hosts that
// the folded table shows one line each, what counts as this machine, node lists given as text, and the run's verdict
// when stages were skipped.
#define BOOST_TEST_MODULE hostcheck_fold
#include <boost/test/unit_test.hpp>

#include "hostcheck.hpp"
#include "hostfile.hpp"
#include "nodelist.hpp"
#include "report.hpp"
#include "resolve.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace lockstep::hostcheck;

namespace {

std::vector<std::string> sorted_unique(std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

// fold then expand gives back the same set of names.
void check_round_trip(const std::vector<std::string>& names) {
    const std::string list = fold_nodelist(names);
    BOOST_TEST_CONTEXT("folded: " << list) {
        BOOST_TEST(sorted_unique(expand_nodelist(list)) == sorted_unique(names), boost::test_tools::per_element());
        // Each name once: a folded list never names a host twice.
        const auto expanded = expand_nodelist(list);
        BOOST_TEST(expanded.size() == sorted_unique(names).size());
    }
}

HostReport failing(const std::string& host, Problem p, const std::string& evidence, const std::string& remedy) {
    HostReport h;
    h.host = host;
    h.lines = {1};
    h.status = HostStatus::Failed;
    h.problem = p;
    h.evidence = evidence;
    h.evidence_line = evidence;
    h.remedy = remedy;
    return h;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fold)

BOOST_AUTO_TEST_CASE(ranges_keep_their_padding) {
    std::vector<std::string> names;
    for (int i = 1; i <= 8; ++i) names.push_back(fmt::format("node{:02}", i));
    names.emplace_back("node10");
    BOOST_TEST(fold_nodelist(names) == "node[01-08,10]");
    BOOST_TEST(fold_nodelist({"n9", "n10", "n11"}) == "n[9-11]");
    BOOST_TEST(fold_nodelist({"n08", "n09", "n10"}) == "n[08-10]");
    BOOST_TEST(fold_nodelist({"n099", "n100"}) == "n[099-100]");
    // `8` and `08` are two names; no range holds both.
    BOOST_TEST(fold_nodelist({"n8", "n08", "n9"}) == "n[08,8-9]");
    BOOST_TEST(fold_nodelist({"n7"}) == "n7");
    BOOST_TEST(fold_nodelist({}).empty());
}

BOOST_AUTO_TEST_CASE(several_dimensions_and_patterns) {
    BOOST_TEST(fold_nodelist({"rack1-gpu1", "rack1-gpu2", "rack2-gpu1", "rack2-gpu2"}) == "rack[1-2]-gpu[1-2]");
    std::vector<std::string> names = expand_nodelist("node[01-08,10],rack[1-2]-gpu[1-2]");
    std::shuffle(names.begin(), names.end(), std::mt19937(7));
    BOOST_TEST(fold_nodelist(names) == "node[01-08,10],rack[1-2]-gpu[1-2]");
    // Not a rectangle: the last dimension folds, the rest as far as it can.
    BOOST_TEST(fold_nodelist({"r1n1", "r1n2", "r2n1"}) == "r1n[1-2],r2n1");
    BOOST_TEST(fold_nodelist({"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1"}) == "10.0.0.[1-3],10.0.1.1");
    // Repeats count once; names without numbers, IPv6 addresses and over-long digit runs stay as they are.
    BOOST_TEST(fold_nodelist({"login", "login", "fd00::15", "n12345678901", "n12345678902"}) ==
               "fd00::15,login,n12345678901,n12345678902");
    BOOST_TEST(fold_nodelist({"alice@n1", "alice@n2", "bob@n3"}) == "alice@n[1-2],bob@n3");
}

BOOST_AUTO_TEST_CASE(round_trips) {
    check_round_trip(expand_nodelist("node[01-08,10],rack[1-2]-gpu[1-2],login01,login02"));
    check_round_trip({"a1b2c3", "a1b2c4", "a2b2c3", "a1b3c3", "x", "x0", "x00", "x000", "x9", "x10", "x010"});
    // Random names of up to three dimensions, with and without padding.
    std::mt19937 random(42);
    for (int round = 0; round < 200; ++round) {
        std::vector<std::string> names;
        const int count = std::uniform_int_distribution<int>(1, 60)(random);
        for (int i = 0; i < count; ++i) {
            std::string name = std::uniform_int_distribution<int>(0, 1)(random) == 0 ? "n" : "gpu";
            const int dimensions = std::uniform_int_distribution<int>(0, 3)(random);
            for (int d = 0; d < dimensions; ++d) {
                const int value = std::uniform_int_distribution<int>(0, 120)(random);
                const int width = std::uniform_int_distribution<int>(1, 3)(random);
                name += fmt::format("{:0{}}", value, width) + (d + 1 < dimensions ? "-" : "");
            }
            names.push_back(name + (std::uniform_int_distribution<int>(0, 3)(random) == 0 ? ".ib" : ""));
        }
        check_round_trip(names);
    }
}

BOOST_AUTO_TEST_CASE(many_names_fold_to_one_range) {
    std::vector<std::string> names;
    for (int i = 0; i < 100000; ++i) names.push_back(fmt::format("c{:06}", i));
    BOOST_TEST(fold_nodelist(names) == "c[000000-099999]");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(groups)

BOOST_AUTO_TEST_CASE(alike_but_for_their_names) {
    Report r;
    for (int i = 1; i <= 15; ++i) {
        const std::string host = fmt::format("node{:02}.invalid", i);
        const std::string text = fmt::format("getaddrinfo(\"{}\"): Name or service not known", host);
        r.hosts.push_back(failing(host, Problem::Dns, text, remedy_for(Problem::Dns, RemedyContext{host})));
    }
    // Refused on another port is another remedy; its evidence names the address, not the name.
    for (const char* host : {"a1", "a2"}) {
        HostReport h = failing(host, Problem::Refused,
                               fmt::format("ssh: connect to host 10.0.0.{} port 2222: Connection refused", host[1]),
                               remedy_for(Problem::Refused, RemedyContext{host, "", 2222}));
        h.addresses = {fmt::format("10.0.0.{}", host[1])};
        r.hosts.push_back(h);
    }
    r.hosts.push_back(failing("a3", Problem::Refused, "ssh: connect to host a3 port 22: Connection refused",
                              remedy_for(Problem::Refused, RemedyContext{"a3"})));
    const auto groups = alike_hosts(r);
    BOOST_TEST_REQUIRE(groups.size() == 3u);
    BOOST_TEST(groups[0].size() == 15u);
    BOOST_TEST((groups[1] == std::vector<std::size_t>{15, 16}));
    BOOST_TEST((groups[2] == std::vector<std::size_t>{17}));

    std::ostringstream out;
    print_text(out, r, TextStyle{});
    const std::string text = out.str();
    BOOST_TEST(text.find("failed dns (15): node[01-15].invalid\n") != std::string::npos, text);
    BOOST_TEST(text.find("failed refused (2): a[1-2]\n") != std::string::npos, text);
    BOOST_TEST(text.find("failed refused (1): a3\n") != std::string::npos, text);
    // One remedy per group: three in all, not eighteen.
    std::size_t remedies = 0;
    for (auto at = text.find("remedy:"); at != std::string::npos; at = text.find("remedy:", at + 1)) ++remedies;
    BOOST_TEST(remedies == 3u, text);
    BOOST_TEST(text.find("[shown for node01.invalid; alike for all 15]") != std::string::npos, text);

    std::ostringstream each;
    print_text(each, r, TextStyle{false, false, false});
    std::size_t each_remedies = 0;
    for (auto at = each.str().find("remedy:"); at != std::string::npos; at = each.str().find("remedy:", at + 1)) {
        ++each_remedies;
    }
    BOOST_TEST(each_remedies == 18u);
}

BOOST_AUTO_TEST_CASE(a_name_inside_a_longer_one_is_not_replaced) {
    Report r;
    // "n1" appears inside "n10" and "n1.ib": neither is n1's own name, so the evidence differs from n2's.
    r.hosts.push_back(failing("n1", Problem::Other, "n10 and n1.ib said no", "read the evidence"));
    r.hosts.push_back(failing("n2", Problem::Other, "n10 and n1.ib said no", "read the evidence"));
    r.hosts.push_back(failing("n3", Problem::Other, "n3: said no.", "read the evidence"));
    r.hosts.push_back(failing("n4", Problem::Other, "n4: said no.", "read the evidence"));
    const auto groups = alike_hosts(r);
    BOOST_TEST_REQUIRE(groups.size() == 2u);
    BOOST_TEST((groups[0] == std::vector<std::size_t>{0, 1}));
    BOOST_TEST((groups[1] == std::vector<std::size_t>{2, 3}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(this_machine_and_node_lists)

BOOST_AUTO_TEST_CASE(what_the_launchers_start_without_ssh) {
    const ThisMachine m = this_machine();
    const std::string name = this_machine_name();
    BOOST_TEST_REQUIRE(!name.empty());
    BOOST_TEST(local_reason("localhost", nullptr, m).has_value());
    BOOST_TEST(local_reason("LOCALHOST", nullptr, m).has_value());
    BOOST_TEST(local_reason(name, nullptr, m).has_value());
    BOOST_TEST(local_reason("127.0.0.1", nullptr, m).has_value());
    BOOST_TEST(local_reason("::1", nullptr, m).has_value());
    // Loopback, but not an interface's address: mpirun starts ssh for it (the test cluster's nodes live there).
    BOOST_TEST(!local_reason("127.0.1.11", nullptr, m).has_value());
    BOOST_TEST(!local_reason("node01.invalid", nullptr, m).has_value());
    Resolution here;
    here.addresses = {"192.0.2.200", "127.0.0.1"};
    BOOST_TEST(local_reason("frontend", &here, m).has_value());
    Resolution elsewhere;
    elsewhere.addresses = {"127.0.1.12"};
    BOOST_TEST(!local_reason("node2", &elsewhere, m).has_value());
}

BOOST_AUTO_TEST_CASE(node_lists_as_text) {
    const Hostfile hf = nodelist_hosts("node[01-03],rack[1-2]-gpu1", "-w", "option");
    BOOST_TEST(hf.targets.size() == 5u);
    BOOST_TEST(hf.targets.front().host == "node01");
    BOOST_TEST(hf.targets.back().host == "rack2-gpu1");
    BOOST_TEST(hf.source == "option");
    BOOST_TEST(hf.path == "-w");
    BOOST_CHECK_THROW((void)nodelist_hosts("node[01-", "-w", "option"), HostfileError);
    BOOST_CHECK_THROW((void)nodelist_hosts("a\nb", "SLURM_JOB_NODELIST", "environment"), HostfileError);
}

BOOST_AUTO_TEST_CASE(a_hostfile_or_a_node_list_not_both) {
    Options o;
    o.skip = {"resolve", "probe", "mpirun"};
    BOOST_CHECK_THROW((void)run_hostcheck(o), UsageError);  // neither
    o.hostfile = LOCKSTEP_HOSTFILES_DIR "/plain";
    o.nodelist = "n[1-2]";
    BOOST_CHECK_THROW((void)run_hostcheck(o), UsageError);  // both
    o.hostfile.clear();
    const Report r = run_hostcheck(o);
    BOOST_TEST(r.hosts.size() == 2u);
    BOOST_TEST(r.hostfile.source == "option");
}

BOOST_AUTO_TEST_CASE(skipped_stages_are_not_all_well) {
    Options o;
    o.nodelist = "n[1-3].invalid";
    o.skip = {"resolve", "probe", "mpirun"};
    const Report r = run_hostcheck(o);
    BOOST_TEST(r.exit_code() == 0);
    const auto unverified = r.unverified();
    const std::string all = fmt::format("{}", fmt::join(unverified, "; "));
    BOOST_TEST(all.find("names: 3 hosts not resolved") != std::string::npos, all);
    BOOST_TEST(all.find("launch (") != std::string::npos, all);
    std::ostringstream out;
    print_text(out, r, TextStyle{});
    BOOST_TEST(out.str().find("all well") == std::string::npos, out.str());
    BOOST_TEST(out.str().find("not verified:") != std::string::npos);
    BOOST_TEST(out.str().find("ssh: 3 hosts not probed (--skip probe)") != std::string::npos, out.str());
    BOOST_TEST(to_json(r)["summary"]["verdict"] == "not_verified");
}

BOOST_AUTO_TEST_SUITE_END()
