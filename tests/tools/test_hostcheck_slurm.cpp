// `lockstep hostcheck` inside a real Slurm allocation (tests/slurm/cluster.sh: slurmctld and slurmd n1-n3 on this
// machine, run as `cluster.sh run THIS-PROGRAM`): the job's nodes are the default host list, and the srun check
// passes its own node and task counts, so that the allocation's SLURM_NTASKS (6 here, for 3 nodes) does not make
// srun start 6 tasks and ignore --ntasks-per-node=1. No ssh is needed: slurmd starts the tasks.
#define BOOST_TEST_MODULE hostcheck_slurm
#include <boost/test/unit_test.hpp>

#include "mpi_launcher/child_process.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
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

}  // namespace

BOOST_AUTO_TEST_CASE(srun_inside_an_allocation_starts_one_task_per_node) {
    env("SLURM_CONF");  // set by tests/slurm/cluster.sh
    Command c;
    // The ssh probe is skipped (srun needs none) and so is name resolution: n1-n3 are Slurm node names only.
    c.argv = {"salloc",
              "-N",
              "3",
              "-n",
              "6",
              "--time=5",
              env("LOCKSTEP_EXE"),
              "hostcheck",
              "--launcher",
              "srun",
              "--skip",
              "resolve,probe",
              "--json",
              "--mpirun-timeout",
              "60"};
    c.timeout = 240s;
    const auto r = run_command(c);
    BOOST_TEST_REQUIRE((r.ending == CommandResult::Ending::Exited), "salloc did not exit: " << r.err);
    BOOST_TEST_MESSAGE(r.out << r.err);
    BOOST_TEST(r.exit_code == 0, r.err);
    const json doc = json::parse(r.out);
    BOOST_TEST(doc["hostfile"]["source"] == "environment");
    BOOST_TEST(doc["hosts"].size() == 3u);
    const json& m = doc["mpirun"];
    BOOST_TEST(m["ran"] == true);
    BOOST_TEST(m["status"] == "ok", m.dump());
    const auto command = m["command"].get<std::vector<std::string>>();
    BOOST_TEST((std::find(command.begin(), command.end(), "--ntasks=3") != command.end()), m.dump());
    auto answered = m["answered"].get<std::vector<std::string>>();
    std::sort(answered.begin(), answered.end());
    BOOST_TEST((answered == std::vector<std::string>{"n1", "n2", "n3"}), m.dump());
    BOOST_TEST(r.err.find("can't honor") == std::string::npos, r.err);
    BOOST_TEST(doc["summary"]["verdict"] == "not_verified");  // names and ssh were skipped
}
