// Unit tests of lockstep-rank-env's pure part: Slurm host lists and task counts, and torchrun's variables computed
// from each launcher's.
#define BOOST_TEST_MODULE rank_env
#include <boost/test/unit_test.hpp>

#include "rank_env.hpp"

#include <stdexcept>

namespace re = lockstep::rank_env;
using Hosts = std::vector<std::string>;

BOOST_AUTO_TEST_CASE(expands_slurm_host_lists) {
    BOOST_TEST(re::expand_hostlist("node[01-03,7],gpu5") == (Hosts{"node01", "node02", "node03", "node7", "gpu5"}),
               boost::test_tools::per_element());
    BOOST_TEST(re::expand_hostlist("n1") == (Hosts{"n1"}), boost::test_tools::per_element());
    BOOST_TEST(re::expand_hostlist("n[1-2],m[3]") == (Hosts{"n1", "n2", "m3"}), boost::test_tools::per_element());
    // The low bound's width is kept; a range that grows past it is not cut.
    BOOST_TEST(re::expand_hostlist("c[8-11]") == (Hosts{"c8", "c9", "c10", "c11"}), boost::test_tools::per_element());
    BOOST_TEST(re::expand_hostlist("c[098-100]") == (Hosts{"c098", "c099", "c100"}), boost::test_tools::per_element());
    // Two brackets in one name: every combination, the first bracket slowest.
    BOOST_TEST(re::expand_hostlist("r[1-2]s[3-4]") == (Hosts{"r1s3", "r1s4", "r2s3", "r2s4"}),
               boost::test_tools::per_element());
    BOOST_TEST(re::expand_hostlist("rack[1]-node[2].ib") == (Hosts{"rack1-node2.ib"}),
               boost::test_tools::per_element());
    BOOST_TEST(re::expand_hostlist("").empty());
    for (const char* bad : {"n[1-2", "n1-2]", "n[]", "n[3-1]", "n[a-b]", "n[[1]]", "n[1,,2]"}) {
        BOOST_CHECK_THROW((void)re::expand_hostlist(bad), std::invalid_argument);
    }
}

BOOST_AUTO_TEST_CASE(expands_tasks_per_node) {
    using Counts = std::vector<int>;
    BOOST_TEST(re::expand_tasks_per_node("2(x3),1") == (Counts{2, 2, 2, 1}), boost::test_tools::per_element());
    BOOST_TEST(re::expand_tasks_per_node("4") == (Counts{4}), boost::test_tools::per_element());
    BOOST_TEST(re::expand_tasks_per_node("1,3") == (Counts{1, 3}), boost::test_tools::per_element());
    for (const char* bad : {"", "2(x)", "2(3)", "2(x0)", "x", "2(x3"}) {
        BOOST_CHECK_THROW((void)re::expand_tasks_per_node(bad), std::invalid_argument);
    }
}

namespace {
re::Environment torch(re::Source source, const re::Environment& environment) {
    return re::torch_variables(source, environment);
}
}  // namespace

BOOST_AUTO_TEST_CASE(open_mpi_variables) {
    // Rank 5 of 8, placed by slot on 2 nodes of 4: the second node, local rank 1. NODE_RANK is not the node's index.
    const re::Environment env{{"OMPI_COMM_WORLD_RANK", "5"},
                              {"OMPI_COMM_WORLD_SIZE", "8"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                              {"OMPI_COMM_WORLD_NODE_RANK", "1"},
                              {"MASTER_ADDR", "host0"},
                              {"MASTER_PORT", "4242"}};
    const re::Environment expected{{"RANK", "5"},
                                   {"WORLD_SIZE", "8"},
                                   {"LOCAL_RANK", "1"},
                                   {"LOCAL_WORLD_SIZE", "4"},
                                   {"GROUP_RANK", "1"},
                                   {"GROUP_WORLD_SIZE", "2"},
                                   {"ROLE_RANK", "5"},
                                   {"ROLE_WORLD_SIZE", "8"},
                                   {"ROLE_NAME", "default"},
                                   {"MASTER_ADDR", "host0"},
                                   {"MASTER_PORT", "4242"}};
    BOOST_TEST((torch(re::Source::OpenMpi, env) == expected));
    // Without a rendezvous from the launcher: this host, and torchrun's default port.
    const re::Environment bare{{"OMPI_COMM_WORLD_RANK", "0"},
                               {"OMPI_COMM_WORLD_SIZE", "1"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}};
    const auto out = torch(re::Source::OpenMpi, bare);
    BOOST_TEST(out.at("MASTER_ADDR") == "127.0.0.1");
    BOOST_TEST(out.at("MASTER_PORT") == "29500");
    // Another launcher's variables are not read.
    BOOST_CHECK_THROW((void)torch(re::Source::Hydra, bare), re::RankEnvError);
    BOOST_CHECK_THROW((void)torch(re::Source::Srun, bare), re::RankEnvError);
}

BOOST_AUTO_TEST_CASE(hydra_variables) {
    // 3 ranks, 2 per node: rank 2 is alone on the second node; the last node may hold fewer.
    const re::Environment env{{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}};
    const auto out = torch(re::Source::Hydra, env);
    BOOST_TEST(out.at("RANK") == "2");
    BOOST_TEST(out.at("WORLD_SIZE") == "3");
    BOOST_TEST(out.at("LOCAL_RANK") == "0");
    BOOST_TEST(out.at("LOCAL_WORLD_SIZE") == "2");
    BOOST_TEST(out.at("GROUP_RANK") == "1");
    BOOST_TEST(out.at("GROUP_WORLD_SIZE") == "2");
}

BOOST_AUTO_TEST_CASE(slurm_variables) {
    // srun -n 5 on node[07-09] as 2,2,1: task 4 is the only one on the third node.
    re::Environment env{{"SLURM_PROCID", "4"},
                        {"SLURM_NTASKS", "5"},
                        {"SLURM_LOCALID", "0"},
                        {"SLURM_NODEID", "2"},
                        {"SLURM_STEP_NUM_NODES", "3"},
                        {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"},
                        {"SLURM_TASKS_PER_NODE", "4(x3)"},
                        {"SLURM_STEP_NODELIST", "node[07-09]"},
                        {"SLURM_JOB_NODELIST", "node[01-09]"},
                        {"MASTER_PORT", "1234"}};
    auto out = torch(re::Source::Srun, env);
    BOOST_TEST(out.at("RANK") == "4");
    BOOST_TEST(out.at("WORLD_SIZE") == "5");
    BOOST_TEST(out.at("LOCAL_RANK") == "0");
    BOOST_TEST(out.at("LOCAL_WORLD_SIZE") == "1");  // the step's count, not the allocation's
    BOOST_TEST(out.at("GROUP_RANK") == "2");
    BOOST_TEST(out.at("GROUP_WORLD_SIZE") == "3");
    BOOST_TEST(out.at("MASTER_ADDR") == "node07");  // the step's first node, not the allocation's
    BOOST_TEST(out.at("MASTER_PORT") == "1234");
    // Without the step's variables (an older Slurm): the allocation's.
    env.erase("SLURM_STEP_TASKS_PER_NODE");
    env.erase("SLURM_STEP_NODELIST");
    env.erase("SLURM_STEP_NUM_NODES");
    out = torch(re::Source::Srun, env);
    BOOST_TEST(out.at("LOCAL_WORLD_SIZE") == "4");
    BOOST_TEST(out.at("GROUP_WORLD_SIZE") == "3");
    BOOST_TEST(out.at("MASTER_ADDR") == "node01");
    // The user's MASTER_ADDR wins over the node list.
    env["MASTER_ADDR"] = "10.0.0.1";
    BOOST_TEST(torch(re::Source::Srun, env).at("MASTER_ADDR") == "10.0.0.1");
}

BOOST_AUTO_TEST_CASE(unreadable_launcher_variables_are_named) {
    auto message = [](re::Source source, const re::Environment& env) {
        try {
            (void)re::torch_variables(source, env);
        } catch (const re::RankEnvError& e) {
            return e.message;
        }
        return std::string("no error");
    };
    BOOST_TEST(message(re::Source::OpenMpi, {}).find("OMPI_COMM_WORLD_RANK is not set") != std::string::npos);
    BOOST_TEST(message(re::Source::Srun,
                       {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}})
                   .find("SLURM_STEP_TASKS_PER_NODE is not set") != std::string::npos);
    BOOST_TEST(message(re::Source::Hydra, {{"PMI_RANK", "x"}}).find("PMI_RANK='x' is not a count") !=
               std::string::npos);
    const re::Environment slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},         {"SLURM_LOCALID", "0"},
                                {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "1"}, {"SLURM_JOB_NODELIST", "n[1-"}};
    BOOST_TEST(message(re::Source::Srun, slurm).find("SLURM_JOB_NODELIST") != std::string::npos);
    BOOST_TEST(message(re::Source::OpenMpi, {{"OMPI_COMM_WORLD_RANK", "2"},
                                             {"OMPI_COMM_WORLD_SIZE", "2"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}})
                   .find("disagree") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(parses_the_launcher_name) {
    BOOST_TEST((re::parse_source("openmpi") == re::Source::OpenMpi));
    BOOST_TEST((re::parse_source("hydra") == re::Source::Hydra));
    BOOST_TEST((re::parse_source("srun") == re::Source::Srun));
    BOOST_TEST(!re::parse_source("mpich").has_value());
}
