// The report of `lockstep hostcheck`: the JSON layout of the documented schema, the exit code rules, and the table
// (colour only when asked for).
#define BOOST_TEST_MODULE hostcheck_report
#include <boost/test/unit_test.hpp>

#include "hostcheck.hpp"
#include "report.hpp"

#include <sstream>
#include <string>

using namespace lockstep::hostcheck;
using namespace lockstep::mpi_launcher;
using nlohmann::json;

namespace {

Report sample_report() {
    Report r;
    r.tool_version = "test";
    r.hostfile = parse_hostfile("n1 slots=2\nn2\nn1 slots=1\n", "cluster.hosts");
    r.settings.agent = SshAgent{{"ssh", "-F", "/c/ssh_config"}, "OMPI_MCA_plm_rsh_agent", true};
    r.settings.local_mpi = parse_mpi_version("mpirun (Open MPI) 4.1.4");
    r.settings.local_mpi.launcher_path = "/usr/bin/mpirun";
    r.settings.time_bound = Seconds(42);
    HostReport ok;
    ok.host = "n1";
    ok.lines = {1, 3};
    ok.slots = 3;
    ok.addresses = {"10.0.0.1"};
    ok.status = HostStatus::Ok;
    ok.remote = RemoteFacts{"node1",
                            "/usr/bin",
                            {{"orted", "/usr/bin/orted"}},
                            "mpirun (Open MPI) 4.1.4",
                            parse_mpi_version("mpirun (Open MPI) 4.1.4"),
                            true};
    ok.probe_elapsed = Seconds(0.25);
    HostReport bad;
    bad.host = "n2";
    bad.lines = {2};
    bad.slots = 1;
    bad.status = HostStatus::Failed;
    bad.problem = Problem::Refused;
    bad.evidence = "ssh: connect to host n2 port 22: Connection refused";
    bad.evidence_line = bad.evidence;
    bad.remedy = remedy_for(Problem::Refused, RemedyContext{"n2", "", 22, "", "", ""});
    r.hosts = {ok, bad};
    r.environment = {EnvironmentGroup{"Open MPI 4.1.4", {{"orted", "/usr/bin/orted"}}, {"n1"}}};
    r.mpirun.reason = "no host passed the ssh probe";
    return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_layout) {
    const json j = to_json(sample_report());
    BOOST_TEST(j["schema"] == "lockstep.hostcheck/1");
    for (const char* key : {"tool", "hostfile", "settings", "hosts", "environment", "mesh", "mpirun", "summary"}) {
        BOOST_TEST(j.contains(key), key);
    }
    BOOST_TEST(j["hostfile"]["format"] == "openmpi");
    BOOST_TEST(j["hostfile"]["lines"].size() == 3u);
    BOOST_TEST(j["hostfile"]["lines"][0]["openmpi"]["summary"].get<std::string>().find("3 in all") !=
               std::string::npos);
    const auto& h0 = j["hosts"][0];
    for (const char* key : {"host", "address", "status", "problem", "evidence", "remedy"}) {
        BOOST_TEST(h0.contains(key), key);
    }
    BOOST_TEST(h0["status"] == "ok");
    BOOST_TEST(h0["problem"].is_null());
    BOOST_TEST(h0["address"] == "10.0.0.1");
    BOOST_TEST(h0["slots"] == 3);
    BOOST_TEST(h0["remote"]["hostname"] == "node1");
    BOOST_TEST(h0["remote"]["mpi"]["flavour"] == "openmpi");
    const auto& h1 = j["hosts"][1];
    BOOST_TEST(h1["status"] == "failed");
    BOOST_TEST(h1["problem"] == "refused");
    BOOST_TEST(h1["address"].is_null());
    BOOST_TEST(h1["remedy"].get<std::string>().find("start sshd") != std::string::npos);
    BOOST_TEST(j["settings"]["ssh_command"] == json({"ssh", "-F", "/c/ssh_config"}));
    BOOST_TEST(j["settings"]["time_bound_s"] == 42.0);
    BOOST_TEST(j["summary"]["failed"] == 1);
    BOOST_TEST(j["summary"]["problems"]["refused"] == 1);
    BOOST_TEST(j["summary"]["exit_code"] == 1);
    BOOST_TEST(j["mesh"]["ran"] == false);
    BOOST_TEST(j["mpirun"]["status"] == "skipped");
}

BOOST_AUTO_TEST_CASE(exit_codes) {
    Report r = sample_report();
    BOOST_TEST(r.exit_code() == 1);
    r.hosts.pop_back();
    BOOST_TEST(r.exit_code() == 0);
    r.hosts[0].status = HostStatus::Warning;  // same_machine and the like count as problems
    BOOST_TEST(r.exit_code() == 1);
    r.hosts[0].status = HostStatus::Ok;
    r.mesh.ran = true;
    r.mesh.pairs.push_back(MeshPair{0, 0, false, Problem::AuthDenied, "denied", "fix"});
    BOOST_TEST(r.exit_code() == 1);
    r.mesh.pairs.clear();
    r.mpirun.ran = true;
    r.mpirun.status = "hang";
    BOOST_TEST(r.exit_code() == 1);
    r.mpirun.status = "ok";
    BOOST_TEST(r.exit_code() == 0);
}

BOOST_AUTO_TEST_CASE(error_documents) {
    const json j = error_json("hostfile", "h:2: bad", {LineError{"h", 2, "x y", "bad"}});
    BOOST_TEST(j["error"]["kind"] == "hostfile");
    BOOST_TEST(j["error"]["lines"][0]["line"] == 2);
    BOOST_TEST(j["summary"]["exit_code"] == 2);
}

BOOST_AUTO_TEST_CASE(table_with_and_without_colour) {
    const Report r = sample_report();
    std::ostringstream plain;
    print_text(plain, r, TextStyle{false, false});
    const std::string text = plain.str();
    BOOST_TEST(text.find('\033') == std::string::npos);
    BOOST_TEST(text.find("hosts: 2 in 2 groups") != std::string::npos, text);
    BOOST_TEST(text.find("failed refused (1): n2") != std::string::npos, text);
    BOOST_TEST(text.find("remedy:") != std::string::npos);
    BOOST_TEST(text.find("Connection refused") != std::string::npos);
    BOOST_TEST(text.find("summary: problems found") != std::string::npos);
    BOOST_TEST(text.find("line 1: n1 slots=2") != std::string::npos);  // a duplicate is notable
    std::ostringstream coloured;
    print_text(coloured, r, TextStyle{true, true});
    BOOST_TEST(coloured.str().find("\033[31m") != std::string::npos);
    BOOST_TEST(coloured.str().find("line 2: n2") != std::string::npos);  // --lines shows every line
    std::ostringstream unfolded;
    print_text(unfolded, r, TextStyle{false, false, false});
    BOOST_TEST(unfolded.str().find("HOST") != std::string::npos);  // --no-fold: the table of one line per host
    BOOST_TEST(unfolded.str().find("Connection refused") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(time_bound_grows_with_hosts_over_fanout) {
    Options o;
    o.fanout = 64;
    o.timeout = std::chrono::seconds(10);
    o.skip = {"mesh", "mpirun"};
    const double small = time_bound(o, 64).count();
    const double large = time_bound(o, 640).count();
    BOOST_TEST(large - small == 9 * 11.0, boost::test_tools::tolerance(1e-9));
    o.max_time = std::chrono::seconds(30);
    BOOST_TEST(time_bound(o, 100000).count() == 30.0);
}

BOOST_AUTO_TEST_CASE(parse_only_runs_need_no_network) {
    Options o;
    o.hostfile = LOCKSTEP_HOSTFILES_DIR "/hydra";
    o.skip = {"resolve", "probe"};
    const Report r = run_hostcheck(o);
    BOOST_TEST(r.hosts.size() == 3u);
    BOOST_TEST((r.hosts[0].status == HostStatus::Skipped));
    BOOST_TEST(r.exit_code() == 0);
    BOOST_TEST(!r.mesh.ran);
    BOOST_TEST(!r.mpirun.ran);
    o.fanout = 0;
    BOOST_CHECK_THROW((void)run_hostcheck(o), UsageError);
    o.fanout = 4;
    o.skip = {"nonsense"};
    BOOST_CHECK_THROW((void)run_hostcheck(o), UsageError);
}
