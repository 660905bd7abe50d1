// `lockstep hostcheck` on one machine, run as the real program (LOCKSTEP_EXE) with the real mpirun: a hostfile that
// names this machine needs no ssh (the launchers start its processes themselves), so it must pass with nothing
// listening on the ssh port; hosts come from a node list (-w), stdin or SLURM_JOB_NODELIST; alike failures fold into
// one line with one remedy; skipped stages are never "all well".
#define BOOST_TEST_MODULE hostcheck_local
#include <boost/test/unit_test.hpp>

#include "mpi_launcher/child_process.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace lockstep::mpi_launcher;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    BOOST_TEST_REQUIRE((v != nullptr && *v != '\0'), name << " is not set: run this test through meson");
    return v;
}

// A TCP port on 127.0.0.1 where nothing listens: bound by the kernel's choice, then closed.
int closed_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    BOOST_TEST_REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_TEST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t length = sizeof a;
    BOOST_TEST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
}

// ssh that cannot reach anything: any host probed over ssh fails with "Connection refused".
std::string dead_ssh() {
    return fmt::format("ssh -p {} -o BatchMode=yes -o ConnectTimeout=5", closed_port());
}

struct Run {
    int exit_code = -1;
    std::string out;
    std::string err;
    json doc;
};

Run hostcheck(const std::vector<std::string>& args, const std::string& input = {},
              std::vector<std::pair<std::string, std::string>> environment = {}) {
    Command c;
    c.argv = {env("LOCKSTEP_EXE"), "hostcheck"};
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    c.input = input;
    c.timeout = 180s;
    // mpirun must never need ssh here: an agent that always fails would show it. SLURM_JOB_NODELIST is emptied so
    // that a run inside an allocation does not take its nodes for the hosts.
    environment.emplace_back("OMPI_MCA_plm_rsh_agent", "false");
    environment.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    environment.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    environment.emplace_back("NO_COLOR", "1");
    if (std::none_of(environment.begin(), environment.end(),
                     [](const auto& e) { return e.first == "SLURM_JOB_NODELIST"; })) {
        environment.emplace_back("SLURM_JOB_NODELIST", "");
    }
    c.environment = std::move(environment);
    const auto r = run_command(c);
    BOOST_TEST_REQUIRE((r.ending == CommandResult::Ending::Exited), "lockstep did not exit: " << r.err);
    Run run{r.exit_code, r.out, r.err, {}};
    if (std::find(args.begin(), args.end(), "--json") != args.end()) run.doc = json::parse(r.out);
    BOOST_TEST_MESSAGE("hostcheck " << fmt::format("{}", fmt::join(args, " ")) << ": exit " << r.exit_code << "\n"
                                    << r.out << r.err);
    return run;
}

// The report validates against docs/hostcheck.schema.json (skipped where python3-jsonschema is missing).
void check_schema(const std::string& report) {
    const std::string file =
        (std::filesystem::temp_directory_path() / fmt::format("lockstep-hostcheck-local-{}.json", ::getpid())).string();
    std::ofstream(file) << report;
    Command c;
    c.argv = {"/usr/bin/python3", env("LOCKSTEP_VALIDATOR"), env("LOCKSTEP_SCHEMA"), "--file", file};
    const auto r = run_command(c);
    std::filesystem::remove(file);
    if (r.exit_code == 77) {
        BOOST_TEST_MESSAGE("schema validation skipped: " << r.err);
        return;
    }
    BOOST_TEST(r.exit_code == 0, r.out << r.err);
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(this_machine_needs_no_ssh) {
    const Run run = hostcheck({LOCKSTEP_HOSTFILES_DIR "/localhost", "--json", "--ssh-command", dead_ssh()});
    const json& h = run.doc["hosts"][0];
    BOOST_TEST(h["host"] == "localhost");
    BOOST_TEST(h["local"] == true);
    BOOST_TEST(h["status"] == "ok", h.dump());
    BOOST_TEST(h["details"].dump().find("local: this machine") != std::string::npos);
    const json& m = run.doc["mpirun"];
    if (find_program("mpirun").empty()) {
        // Nothing to launch with: the job could not start from here either.
        BOOST_TEST(run.exit_code == 1);
        BOOST_TEST(m["ran"] == false);
    } else {
        BOOST_TEST(run.exit_code == 0, run.out);
        BOOST_TEST(m["ran"] == true);
        BOOST_TEST(m["status"] == "ok", m.dump());
        BOOST_TEST(m["missing"].empty());
        BOOST_TEST(run.doc["summary"]["verdict"] == "all_well");
    }
    check_schema(run.out);
}

BOOST_AUTO_TEST_CASE(this_machine_by_its_own_name_and_address_from_stdin) {
    char name[256] = {};
    BOOST_TEST_REQUIRE(::gethostname(name, sizeof name - 1) == 0);
    const Run run = hostcheck({"-", "--json", "--skip", "mpirun", "--ssh-command", dead_ssh()},
                              fmt::format("{}\n127.0.0.1\n", name));
    BOOST_TEST(run.doc["hostfile"]["source"] == "stdin");
    BOOST_TEST_REQUIRE(run.doc["hosts"].size() == 2u);
    for (const auto& h : run.doc["hosts"]) {
        BOOST_TEST(h["local"] == true, h.dump());
        BOOST_TEST(h["problem"] != "refused", h.dump());
    }
    // Two names of one machine: Hydra would count two nodes.
    BOOST_TEST(run.doc["hosts"][1]["problem"] == "same_machine", run.doc["hosts"][1].dump());
    BOOST_TEST(run.exit_code == 1);
}

BOOST_AUTO_TEST_CASE(other_loopback_addresses_go_through_ssh) {
    // 127.0.0.2 reaches this machine, but mpirun starts ssh for it: with nothing on the port it is refused.
    const Run run = hostcheck({"-w", "127.0.0.2", "--json", "--skip", "mpirun", "--ssh-command", dead_ssh()});
    const json& h = run.doc["hosts"][0];
    BOOST_TEST(h["local"] == false);
    BOOST_TEST(h["problem"] == "refused", h.dump());
    BOOST_TEST(run.exit_code == 1);
}

BOOST_AUTO_TEST_CASE(alike_failures_fold_into_one_line) {
    const std::string list = "node[01-08,10].invalid,rack[1-2]-gpu[1-2].invalid,login[1-2].invalid";
    const Run run = hostcheck({"-w", list, "--timeout", "5", "--ssh-command", dead_ssh()});
    BOOST_TEST(run.exit_code == 1);
    BOOST_TEST(run.out.find("hosts from -w: Slurm node list, 15 hosts") != std::string::npos, run.out);
    BOOST_TEST(
        run.out.find("failed dns (15): login[1-2].invalid,node[01-08,10].invalid,rack[1-2]-gpu[1-2].invalid\n") !=
            std::string::npos,
        run.out);
    BOOST_TEST(count(run.out, "remedy:") == 1u, run.out);
    BOOST_TEST(
        run.out.find("summary: problems found: 15 hosts: 0 ok, 0 warnings, 15 failed (dns 15)") != std::string::npos,
        run.out);
    // One line per host on request, and in the JSON always.
    const Run each = hostcheck({"-w", list, "--timeout", "5", "--ssh-command", dead_ssh(), "--no-fold"});
    BOOST_TEST(count(each.out, "remedy:") == 15u, each.out);
    const Run doc = hostcheck({"-w", list, "--timeout", "5", "--ssh-command", dead_ssh(), "--json"});
    BOOST_TEST(doc.doc["hosts"].size() == 15u);
    BOOST_TEST(doc.doc["summary"]["problems"]["dns"] == 15);
    check_schema(doc.out);
}

BOOST_AUTO_TEST_CASE(skipped_stages_are_never_all_well) {
    const Run run = hostcheck({"-w", "n[1-3].invalid", "--skip", "resolve,probe"});
    BOOST_TEST(run.exit_code == 0);
    BOOST_TEST(run.out.find("all well") == std::string::npos, run.out);
    BOOST_TEST(run.out.find("not verified:") != std::string::npos, run.out);
    BOOST_TEST(run.out.find("ssh: 3 hosts not probed (--skip probe)") != std::string::npos, run.out);
    BOOST_TEST(run.out.find("launch (") != std::string::npos, run.out);
    const Run doc = hostcheck({"-w", "n[1-3].invalid", "--skip", "resolve,probe", "--json"});
    BOOST_TEST(doc.doc["summary"]["verdict"] == "not_verified");
    BOOST_TEST(doc.doc["summary"]["unverified"].size() >= 2u);
    check_schema(doc.out);
}

BOOST_AUTO_TEST_CASE(the_allocation_is_the_default_host_list) {
    const Run run = hostcheck({"--json", "--skip", "mpirun", "--ssh-command", dead_ssh()}, {},
                              {{"SLURM_JOB_NODELIST", "localhost"}});
    BOOST_TEST(run.doc["hostfile"]["source"] == "environment");
    BOOST_TEST(run.doc["hostfile"]["path"] == "SLURM_JOB_NODELIST");
    BOOST_TEST(run.doc["hosts"][0]["local"] == true);
    BOOST_TEST(run.exit_code == 0, run.out);
    // Without one, and without a hostfile or -w, there is nothing to check: a usage error.
    const Run none = hostcheck({});
    BOOST_TEST(none.exit_code == 2);
    BOOST_TEST(none.err.find("no hosts to check") != std::string::npos, none.err);
    const Run both = hostcheck({LOCKSTEP_HOSTFILES_DIR "/plain", "-w", "n1"});
    BOOST_TEST(both.exit_code == 2);
}
