#define BOOST_TEST_MODULE identity
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

using namespace lockstep;

BOOST_AUTO_TEST_CASE(identity_from_each_launchers_variables) {
    struct Case {
        const char* launcher;
        std::map<std::string, std::string> vars;
        int rank, size, local_rank, local_size;
        const char* source;
    };
    const Case cases[] = {
        {"none", {}, 0, 1, 0, 1, "default"},
        {"OpenMPI",
         {{"OMPI_COMM_WORLD_RANK", "3"},
          {"OMPI_COMM_WORLD_SIZE", "8"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
         3,
         8,
         1,
         2,
         "OMPI_COMM_WORLD_RANK"},
        {"PMIx", {{"PMIX_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"}}, 5, 6, 0, 1, "PMIX_RANK"},
        {"Hydra",
         {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}},
         2,
         4,
         0,
         2,
         "PMI_RANK"},
        {"MVAPICH",
         {{"MV2_COMM_WORLD_RANK", "7"},
          {"MV2_COMM_WORLD_SIZE", "16"},
          {"MV2_COMM_WORLD_LOCAL_RANK", "3"},
          {"MV2_COMM_WORLD_LOCAL_SIZE", "4"}},
         7,
         16,
         3,
         4,
         "MV2_COMM_WORLD_RANK"},
        {"Slurm",
         {{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "12"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "4"}},
         9,
         12,
         1,
         4,
         "SLURM_PROCID"},
        // OpenMPI inside a Slurm allocation: mpirun's own variables win over the allocation's.
        {"OpenMPI under Slurm",
         {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}},
         1,
         2,
         0,
         1,
         "OMPI_COMM_WORLD_RANK"},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.launcher) {
            const ProcessIdentity id = identity_from_environment(map_environment(c.vars));
            BOOST_TEST(id.rank == c.rank);
            BOOST_TEST(id.size == c.size);
            BOOST_TEST(id.local_rank == c.local_rank);
            BOOST_TEST(id.local_size == c.local_size);
            BOOST_TEST(id.source == c.source);
            BOOST_TEST(id.hostname == host_name());
            BOOST_TEST(!id.hostname.empty());
        }
    }
}

BOOST_AUTO_TEST_CASE(corrupt_launcher_variables_are_config_errors_naming_the_variable) {
    const std::map<std::string, std::string> bad[] = {
        {{"OMPI_COMM_WORLD_RANK", "x"}},
        {{"OMPI_COMM_WORLD_RANK", "-1"}},
        {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "0"}},
        {{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}},  // rank not below size
        {{"SLURM_PROCID", "2 "}},
    };
    for (const auto& vars : bad) {
        try {
            (void)identity_from_environment(map_environment(vars));
            BOOST_FAIL("accepted " << vars.begin()->first << "=" << vars.begin()->second);
        } catch (const ConfigError& e) {
            BOOST_TEST(e.source().find("environment ") == 0u);
        }
    }
}
