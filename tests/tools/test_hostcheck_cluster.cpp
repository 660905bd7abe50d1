// `lockstep hostcheck` against a real test cluster: sshd nodes on 127.0.1.x in their own UTS namespaces, started by
// tests/cluster/cluster.sh (which runs this program and stops every node afterwards). Each broken node must be
// reported with its own problem code and a remedy, the healthy ones must pass, the mpirun check must succeed across
// them (and be reported as a hang where a node's daemon never answers), the mesh must find the node that cannot reach
// another, the JSON must validate against the published schema, and every run must end within its time bound.
#define BOOST_TEST_MODULE hostcheck_cluster
#include <boost/test/unit_test.hpp>

#include "mpi_launcher/child_process.hpp"
#include "run_together.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace lockstep::mpi_launcher;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
        throw std::runtime_error(
            fmt::format("{} is not set: run this test through tests/cluster/cluster.sh run "
                        "(meson test --suite cluster does)",
                        name));
    }
    return v;
}

struct Run {
    int exit_code = -1;
    json doc;
    std::string out;
    std::string err;
    double seconds = 0;
};

Command hostcheck_command(const std::vector<std::string>& args,
                          std::vector<std::pair<std::string, std::string>> environment = {}) {
    Command c;
    c.argv = {env("LOCKSTEP_EXE"), "hostcheck"};
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    c.timeout = 600s;
    c.environment = std::move(environment);
    return c;
}

Run finished(const std::vector<std::string>& args, const CommandResult& r) {
    BOOST_TEST_REQUIRE((r.ending == CommandResult::Ending::Exited), "lockstep did not exit: " << r.err);
    Run run;
    run.exit_code = r.exit_code;
    run.out = r.out;
    run.err = r.err;
    run.seconds = r.elapsed.count();
    if (std::find(args.begin(), args.end(), "--json") != args.end()) run.doc = json::parse(r.out);
    BOOST_TEST_MESSAGE("lockstep hostcheck " << fmt::format("{}", fmt::join(args, " ")) << ": exit " << r.exit_code
                                             << " in " << run.seconds << " s");
    return run;
}

Run hostcheck(const std::vector<std::string>& args, std::vector<std::pair<std::string, std::string>> environment = {}) {
    return finished(args, run_command(hostcheck_command(args, std::move(environment))));
}

std::vector<Run> hostcheck_together(const std::vector<std::vector<std::string>>& runs) {
    return run_together(
        runs, [](const std::vector<std::string>& args) { return hostcheck_command(args); }, finished);
}

std::string cluster(const std::string& file) {
    return env("LOCKSTEP_CLUSTER_DIR") + "/" + file;
}

const json& host_entry(const json& doc, const std::string& host) {
    for (const auto& h : doc["hosts"]) {
        if (h["host"] == host) return h;
    }
    throw std::runtime_error("no host " + host + " in the report");
}

struct Expectation {
    std::string host;
    std::string problem;  // "ok" for a healthy node
    std::string node;     // its hostname, "-" when it has no sshd
};

std::vector<Expectation> expectations() {
    std::ifstream in(cluster("expected"));
    std::vector<Expectation> out;
    for (Expectation e; in >> e.host >> e.problem >> e.node;) out.push_back(e);
    return out;
}

// The runs that wait longest, started together on first use: the full run over every node (shared by the cases that
// read it; it waits out the silent node's 20 s), the table over every node (the same wait) and the hanging launch
// (mpirun's 10 s). One after the other they took about 55 s; together, about as long as the longest.
enum WaitingRun : std::size_t { kAllNodes, kTable, kHangingLaunch };
const Run& waiting_run(WaitingRun which) {
    static const std::vector<Run> runs = hostcheck_together({
        {cluster("hostfile_all"), "--json", "--timeout", "20"},
        {cluster("hostfile_all"), "--timeout", "20", "--no-mesh", "--skip", "mpirun"},
        {cluster("hostfile_hang"), "--json", "--timeout", "20", "--no-mesh", "--mpirun-timeout", "10"},
    });
    return runs.at(which);
}

const Run& all_nodes() {
    return waiting_run(kAllNodes);
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_broken_node_gets_its_own_problem_and_remedy) {
    const Run& run = all_nodes();
    BOOST_TEST(run.exit_code == 1);
    const auto expected = expectations();
    BOOST_TEST_REQUIRE(expected.size() == 12u);
    BOOST_TEST(run.doc["hosts"].size() == expected.size());
    for (const auto& e : expected) {
        const json& h = host_entry(run.doc, e.host);
        if (e.problem == "ok") {
            BOOST_TEST(h["status"] == "ok", e.host << ": " << h.dump());
            BOOST_TEST(h["problem"].is_null(), e.host);
        } else {
            BOOST_TEST(h["status"] == "failed", e.host);
            BOOST_TEST(h["problem"] == e.problem, e.host << ": " << h.dump());
            BOOST_TEST(!h["evidence"].get<std::string>().empty(), e.host);
            BOOST_TEST(h["remedy"].get<std::string>().size() > 20u, e.host);
        }
        if (e.node != "-" && (e.problem == "ok" || e.problem == "remote_mpi_missing")) {
            BOOST_TEST(h["remote"]["hostname"] == e.node, e.host);
        }
    }
    // The local explanations: the key ssh ignored, and known_hosts without the node's entry.
    const json& loose = host_entry(run.doc, "127.0.1.20");
    BOOST_TEST(loose["remedy"].get<std::string>().find("chmod 600 " + cluster("loose_key")) != std::string::npos);
    const json& unknown = host_entry(run.doc, "127.0.1.14");
    BOOST_TEST(unknown["remedy"].get<std::string>().find("ssh-keyscan -p") != std::string::npos);
    BOOST_TEST(unknown["details"].dump().find("no entry for '[127.0.1.14]:") != std::string::npos);
    BOOST_TEST(run.doc["summary"]["ok"] == 3);
    BOOST_TEST(run.doc["summary"]["failed"] == 9);
}

BOOST_AUTO_TEST_CASE(mpirun_across_the_healthy_nodes) {
    const json& m = all_nodes().doc["mpirun"];
    BOOST_TEST(m["ran"] == true);
    BOOST_TEST(m["status"] == "ok", m.dump());
    BOOST_TEST(m["hosts"] == json({"127.0.1.11", "127.0.1.12", "127.0.1.13"}));
    auto answered = m["answered"].get<std::vector<std::string>>();
    std::sort(answered.begin(), answered.end());
    BOOST_TEST((answered == std::vector<std::string>{"node1", "node2", "node3"}));
    BOOST_TEST(m["missing"].empty());
}

BOOST_AUTO_TEST_CASE(mesh_finds_the_node_that_cannot_reach_another) {
    const json& mesh = all_nodes().doc["mesh"];
    BOOST_TEST(mesh["ran"] == true);
    BOOST_TEST(mesh["reason"] == "Open MPI tree spawn is on");
    // The nodes the probe reached: three healthy ones and the one without MPI on its PATH.
    BOOST_TEST(mesh["nodes"] == json({"127.0.1.11", "127.0.1.12", "127.0.1.13", "127.0.1.16"}));
    BOOST_TEST(mesh["pairs_checked"] == 12);
    BOOST_TEST_REQUIRE(mesh["failures"].size() == 1u, mesh["failures"].dump());
    const json& f = mesh["failures"][0];
    BOOST_TEST(f["from"] == "127.0.1.13");
    BOOST_TEST(f["to"] == "127.0.1.11");
    BOOST_TEST(f["problem"] == "auth_denied");
    BOOST_TEST(f["evidence"].get<std::string>().find("Permission denied") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(remote_environments_are_grouped) {
    const json& environment = all_nodes().doc["environment"];
    BOOST_TEST(environment["consistent"] == false);
    BOOST_TEST_REQUIRE(environment["groups"].size() == 2u);
    BOOST_TEST(environment["groups"][0]["hosts"] == json({"127.0.1.11", "127.0.1.12", "127.0.1.13"}));
    BOOST_TEST(environment["groups"][0]["mpi"].get<std::string>().starts_with("Open MPI "));
    BOOST_TEST(environment["groups"][1]["hosts"] == json({"127.0.1.16"}));
    BOOST_TEST(environment["groups"][1]["mpi"] == "none");
}

BOOST_AUTO_TEST_CASE(report_validates_against_the_schema) {
    const std::string file = cluster("report_all.json");
    std::ofstream(file) << all_nodes().out;
    Command c;
    c.argv = {env("LOCKSTEP_PYTHON"), env("LOCKSTEP_VALIDATOR"), env("LOCKSTEP_SCHEMA"), "--file", file};
    const auto r = run_command(c);
    if (r.exit_code == 77) {
        BOOST_TEST_MESSAGE("schema validation skipped: " << r.err);
        return;
    }
    BOOST_TEST(r.exit_code == 0, r.out << r.err);
}

BOOST_AUTO_TEST_CASE(all_well_exits_zero) {
    const Run run = hostcheck({cluster("hostfile_good"), "--json", "--timeout", "20"});
    BOOST_TEST(run.exit_code == 0, run.out);
    BOOST_TEST(run.doc["mesh"]["ran"] == true);
    BOOST_TEST(run.doc["mesh"]["failures"].empty());
    BOOST_TEST(run.doc["mpirun"]["status"] == "ok");
    BOOST_TEST(run.doc["summary"]["exit_code"] == 0);
    BOOST_TEST(run.seconds <= run.doc["summary"]["time_bound_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(table_for_people) {
    const Run& run = waiting_run(kTable);
    BOOST_TEST(run.exit_code == 1);
    BOOST_TEST(run.out.find('\033') == std::string::npos);  // not a terminal: no colour
    BOOST_TEST(run.out.find("Connection refused") != std::string::npos);
    BOOST_TEST(run.out.find("remedy: ") != std::string::npos);
    BOOST_TEST(run.out.find("summary: problems found: 12 hosts: 3 ok") != std::string::npos, run.out);
}

BOOST_AUTO_TEST_CASE(a_hanging_launch_is_reported_as_a_hang) {
    const Run& run = waiting_run(kHangingLaunch);
    BOOST_TEST(run.exit_code == 1);
    const json& m = run.doc["mpirun"];
    BOOST_TEST(m["status"] == "hang", m.dump());
    const auto missing = m["missing"].get<std::vector<std::string>>();
    BOOST_TEST((std::find(missing.begin(), missing.end(), "127.0.1.22") != missing.end()));
    BOOST_TEST(m["remedy"].get<std::string>().find("127.0.1.22") != std::string::npos);
    BOOST_TEST(run.seconds <= run.doc["summary"]["time_bound_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(hanging_nodes_do_not_stretch_the_run) {
    // A node that accepts TCP and never answers, between two healthy ones.
    const Run bounded =
        hostcheck({cluster("hostfile_silent"), "--json", "--timeout", "3", "--no-mesh", "--skip", "mpirun"});
    BOOST_TEST(host_entry(bounded.doc, "127.0.1.18")["problem"] == "timeout");
    BOOST_TEST(bounded.seconds <= bounded.doc["summary"]["time_bound_s"].get<double>());

    // --max-time cuts the run short whatever --timeout says.
    const Run capped = hostcheck({cluster("hostfile_silent"), "--json", "--timeout", "60", "--max-time", "8"});
    BOOST_TEST(capped.seconds < 8.0 + 3.0);
    BOOST_TEST(capped.doc["summary"]["time_bound_s"] == 8.0);
    BOOST_TEST(host_entry(capped.doc, "127.0.1.18")["problem"] == "timeout");
    BOOST_TEST(capped.exit_code == 1);
}

BOOST_AUTO_TEST_CASE(ssh_command_option_reaches_mpirun_too) {
    // The launcher's own setting points at a command that always fails; --ssh-command must win for the probe and be
    // handed to mpirun as well.
    const std::string ssh = "ssh -F " + cluster("ssh_config");
    const Run run =
        hostcheck({cluster("hostfile_good"), "--json", "--timeout", "20", "--no-mesh", "--ssh-command", ssh},
                  {{"OMPI_MCA_plm_rsh_agent", "false"}});
    BOOST_TEST(run.exit_code == 0, run.out << run.err);
    BOOST_TEST(run.doc["settings"]["ssh_command_source"] == "--ssh-command");
    BOOST_TEST(run.doc["mpirun"]["status"] == "ok");
}

BOOST_AUTO_TEST_CASE(malformed_hostfile_is_a_usage_error) {
    const std::string file = cluster("hostfile_malformed");
    std::ofstream(file) << "127.0.1.11 slots=2\n127.0.1.12 slots=lots\n";
    const Run run = hostcheck({file, "--json"});
    BOOST_TEST(run.exit_code == 2);
    BOOST_TEST(run.doc["error"]["kind"] == "hostfile");
    BOOST_TEST(run.doc["error"]["lines"][0]["line"] == 2);
    BOOST_TEST(run.err.find(file + ":2:") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(this_machine_with_a_node_over_ssh) {
    // This machine needs no ssh, node1 does: mpirun starts one locally and one through the cluster's ssh config.
    const std::string file = cluster("hostfile_mixed");
    std::ofstream(file) << "localhost\n127.0.1.11\n";
    const Run run = hostcheck({file, "--json", "--timeout", "20", "--no-mesh"});
    BOOST_TEST(run.exit_code == 0, run.out << run.err);
    BOOST_TEST(host_entry(run.doc, "localhost")["local"] == true);
    BOOST_TEST(host_entry(run.doc, "localhost")["status"] == "ok");
    BOOST_TEST(host_entry(run.doc, "127.0.1.11")["local"] == false);
    BOOST_TEST(host_entry(run.doc, "127.0.1.11")["remote"]["hostname"] == "node1");
    const json& m = run.doc["mpirun"];
    BOOST_TEST(m["status"] == "ok", m.dump());
    BOOST_TEST(m["hosts"] == json({"localhost", "127.0.1.11"}));
    const auto answered = m["answered"].get<std::vector<std::string>>();
    BOOST_TEST((std::find(answered.begin(), answered.end(), "node1") != answered.end()));
    BOOST_TEST(answered.size() == 2u);
}

BOOST_AUTO_TEST_CASE(alike_failures_share_one_line) {
    // Two refused addresses and two that time out fold into one line each; --no-fold lists every host.
    const std::string file = cluster("hostfile_folded");
    std::ofstream(file) << "127.0.1.7\n127.0.1.17\n127.0.1.11\n127.0.1.12\n";
    const Run run = hostcheck({file, "--timeout", "20", "--no-mesh", "--skip", "mpirun"});
    BOOST_TEST(run.exit_code == 1);
    BOOST_TEST(run.out.find("failed refused (2): 127.0.1.[7,17]\n") != std::string::npos, run.out);
    BOOST_TEST(run.out.find("ok (2): 127.0.1.[11-12]") != std::string::npos, run.out);
    std::size_t remedies = 0;
    for (auto at = run.out.find("remedy:"); at != std::string::npos; at = run.out.find("remedy:", at + 1)) ++remedies;
    BOOST_TEST(remedies == 1u, run.out);
}
