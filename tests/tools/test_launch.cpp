// Unit tests of the launcher's pure parts: shell-like splitting and quoting, the launcher chosen from version text,
// and the command built for each launcher.
#define BOOST_TEST_MODULE launch
#include <boost/test/unit_test.hpp>

#include "launch/launcher.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace ln = lockstep::launch;
namespace ml = lockstep::mpi_launcher;

namespace lockstep::mpi_launcher {
std::ostream& operator<<(std::ostream& os, Launcher l) {
    return os << to_string(l);
}
}  // namespace lockstep::mpi_launcher

namespace {
std::optional<ml::Launcher> launcher_from_version_text(std::string_view text) {
    return ml::launcher_for(ml::parse_mpi_version(text).flavour);
}
}  // namespace

BOOST_AUTO_TEST_CASE(splits_like_a_shell) {
    using V = std::vector<std::string>;
    BOOST_TEST(ln::split_shell_words("  -a  b\t'c d' \"e \\\"f\\\" $g\" h\\ i ''", "x") ==
                   (V{"-a", "b", "c d", "e \"f\" $g", "h i", ""}),
               boost::test_tools::per_element());
    BOOST_TEST(ln::split_shell_words("", "x").empty());
    BOOST_TEST(ln::split_shell_words("--mca btl '^openib'", "x") == (V{"--mca", "btl", "^openib"}),
               boost::test_tools::per_element());
    BOOST_CHECK_THROW((void)ln::split_shell_words("a 'b", "x"), ln::UsageError);
    BOOST_CHECK_THROW((void)ln::split_shell_words("a \"b", "x"), ln::UsageError);
    BOOST_CHECK_THROW((void)ln::split_shell_words("a\\", "x"), ln::UsageError);
}

BOOST_AUTO_TEST_CASE(quotes_for_a_shell) {
    BOOST_TEST(ln::shell_quote("plain/path-1.0") == "plain/path-1.0");
    BOOST_TEST(ln::shell_quote("") == "''");
    BOOST_TEST(ln::shell_quote("it's a b") == "'it'\\''s a b'");
    // Whatever is quoted splits back to the same word.
    for (std::string w : {"a b", "x'y", "$HOME", "\"q\"", "back\\slash"}) {
        BOOST_TEST(ln::split_shell_words(ln::shell_quote(w), "x").front() == w);
    }
}

BOOST_AUTO_TEST_CASE(detects_the_mpi_flavour) {
    BOOST_TEST(
        launcher_from_version_text("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/").value() ==
        ml::Launcher::OpenMpi);
    BOOST_TEST(launcher_from_version_text("HYDRA build details:\n    Version: 4.0.2").value() == ml::Launcher::Hydra);
    BOOST_TEST(launcher_from_version_text("Intel(R) MPI Library for Linux* OS, Version 2021.6").value() ==
               ml::Launcher::Hydra);
    BOOST_TEST(!launcher_from_version_text("something else 1.0").has_value());
}

namespace {
ln::Request request() {
    ln::Request r;
    r.num_processes = 2;
    r.debug = false;
    r.timeout = "90s";
    r.program = {"./train", "--debug"};
    return r;
}
const ln::Environment base_env{{"LOCKSTEP_CONFIG_FILE", ""}, {"LOCKSTEP_SEED", "5"}, {"PATH", "/usr/bin"}};
}  // namespace

BOOST_AUTO_TEST_CASE(flags_become_forwarded_variables) {
    const ln::Plan plan = ln::plan_launch(request(), ml::Launcher::OpenMpi, base_env, false);
    BOOST_TEST(plan.environment.at("LOCKSTEP_DEBUG_MODE") == "0");
    BOOST_TEST(plan.environment.at("LOCKSTEP_TIMEOUT") == "90s");
    BOOST_TEST(plan.environment.at("LOCKSTEP_LAUNCHER_FLAGS") == "LOCKSTEP_DEBUG_MODE,LOCKSTEP_TIMEOUT");
    BOOST_TEST(plan.environment.at("PATH") == "/usr/bin");
    const std::vector<std::string> expected{"mpirun",
                                            "-np",
                                            "2",
                                            "-x",
                                            "LOCKSTEP_CONFIG_FILE",
                                            "-x",
                                            "LOCKSTEP_DEBUG_MODE",
                                            "-x",
                                            "LOCKSTEP_LAUNCHER_FLAGS",
                                            "-x",
                                            "LOCKSTEP_SEED",
                                            "-x",
                                            "LOCKSTEP_TIMEOUT",
                                            "./train",
                                            "--debug"};
    BOOST_TEST(plan.command == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(default_launcher_programs) {
    BOOST_TEST(ln::default_launcher_program(ml::Launcher::Srun) == "srun");
    BOOST_TEST(ln::default_launcher_program(ml::Launcher::OpenMpi) == "mpirun");
    // Built against MPICH: its Hydra launcher (mpiexec.mpich) for hydra; against Open MPI, mpirun for both.
    const std::string built(ln::built_mpi_launcher());
    BOOST_TEST(ln::default_launcher_program(ml::Launcher::Hydra) == (built == "mpirun" ? "mpirun" : built));
    BOOST_TEST(!built.empty());
}

// --check: the ranks preload the checking library after what the caller preloads; the launcher itself does not.
BOOST_AUTO_TEST_CASE(check_preloads_the_library_on_the_ranks_only) {
    auto r = request();
    r.check_library = "/opt/lockstep/lib/liblockstep_check.so";
    const auto find = [](const std::vector<std::string>& argv, const std::string& word) {
        return std::find(argv.begin(), argv.end(), word) != argv.end();
    };
    const ln::Plan plain = ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false);
    BOOST_TEST(find(plain.command, "LD_PRELOAD=/opt/lockstep/lib/liblockstep_check.so"));
    BOOST_TEST(!plain.environment.contains("LD_PRELOAD"));
    BOOST_TEST(plain.set_variables.at("LD_PRELOAD") == "/opt/lockstep/lib/liblockstep_check.so");
    auto env = base_env;
    env["LD_PRELOAD"] = "/usr/lib/libtool.so";
    const ln::Plan hydra = ln::plan_launch(r, ml::Launcher::Hydra, env, false);
    BOOST_TEST(find(hydra.command, "/usr/lib/libtool.so:/opt/lockstep/lib/liblockstep_check.so"));
    BOOST_TEST(hydra.environment.at("LD_PRELOAD") == "/usr/lib/libtool.so");  // the launcher's own, unchanged
    const ln::Plan srun = ln::plan_launch(r, ml::Launcher::Srun, env, false);
    const auto exported = std::find_if(srun.command.begin(), srun.command.end(),
                                       [](const std::string& a) { return a.starts_with("--export="); });
    BOOST_TEST_REQUIRE((exported != srun.command.end()));
    BOOST_TEST(exported->ends_with(",LD_PRELOAD=/usr/lib/libtool.so:/opt/lockstep/lib/liblockstep_check.so"));
}

BOOST_AUTO_TEST_CASE(root_and_flavours) {
    auto r = request();
    r.npernode = 4;
    r.hostfile = "hosts";
    const auto root = ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, true);
    BOOST_TEST(root.command.at(1) == "--allow-run-as-root");
    const auto hydra = ln::plan_launch(r, ml::Launcher::Hydra, base_env, true);
    // Hydra's program is the built-against MPI's launcher when that is Hydra (MPICH's mpiexec.mpich), else mpirun.
    BOOST_TEST(hydra.command.at(0) == ln::default_launcher_program(ml::Launcher::Hydra));
    const std::vector<std::string> hydra_args{"-n", "2", "-f", "hosts", "-ppn", "4", "-genv", "LOCKSTEP_CONFIG_FILE",
                                              ""};
    BOOST_TEST(std::vector<std::string>(hydra.command.begin() + 1, hydra.command.begin() + 10) == hydra_args,
               boost::test_tools::per_element());
    const auto srun = ln::plan_launch(r, ml::Launcher::Srun, base_env, true);
    BOOST_TEST(srun.command.at(0) == "srun");
    BOOST_TEST(srun.command.at(1) == "--ntasks=2");
    BOOST_TEST(srun.command.at(4) ==
               "--export=ALL,LOCKSTEP_CONFIG_FILE,LOCKSTEP_DEBUG_MODE,LOCKSTEP_LAUNCHER_FLAGS,LOCKSTEP_SEED,"
               "LOCKSTEP_TIMEOUT");
}

BOOST_AUTO_TEST_CASE(bad_values_are_usage_errors) {
    auto r = request();
    r.timeout = "-1";
    BOOST_CHECK_THROW((void)ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false), ln::UsageError);
    r = request();
    r.log_level = "chatty";
    BOOST_CHECK_THROW((void)ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false), ln::UsageError);
    r = request();
    r.program.clear();
    BOOST_CHECK_THROW((void)ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false), ln::UsageError);
    r = request();
    r.config_file = "/nonexistent/config.yaml";
    BOOST_CHECK_THROW((void)ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false), ln::UsageError);
    r = request();
    r.num_processes.reset();
    BOOST_TEST(ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false).num_processes == 1);
}

BOOST_AUTO_TEST_CASE(torchrun_variables_through_lockstep_rank_env) {
    auto r = request();
    r.rank_env_program = "/opt/lockstep/bin/lockstep-rank-env";
    r.master_port = 29400;
    const std::vector<std::string> tail{
        "/opt/lockstep/bin/lockstep-rank-env", "--from", "openmpi", "--", "./train", "--debug"};
    // One node: rank 0 is here.
    auto plan = ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false);
    BOOST_TEST(plan.environment.at("MASTER_ADDR") == "127.0.0.1");
    BOOST_TEST(plan.environment.at("MASTER_PORT") == "29400");
    BOOST_TEST(plan.set_variables.at("MASTER_PORT") == "29400");
    BOOST_TEST(std::vector<std::string>(plan.command.end() - 10, plan.command.end() - 6) ==
                   (std::vector<std::string>{"-x", "MASTER_ADDR", "-x", "MASTER_PORT"}),
               boost::test_tools::per_element());
    BOOST_TEST(std::vector<std::string>(plan.command.end() - 6, plan.command.end()) == tail,
               boost::test_tools::per_element());
    // The user's rendezvous is kept, and forwarded.
    auto env = base_env;
    env["MASTER_ADDR"] = "head";
    env["MASTER_PORT"] = "1234";
    plan = ln::plan_launch(r, ml::Launcher::Hydra, env, false);
    BOOST_TEST(plan.environment.at("MASTER_ADDR") == "head");
    BOOST_TEST(plan.environment.at("MASTER_PORT") == "1234");
    BOOST_TEST(plan.master_addr_source == "environment MASTER_ADDR");
    const auto at = std::find(plan.command.begin(), plan.command.end(), "MASTER_ADDR");
    BOOST_REQUIRE(at != plan.command.end());
    BOOST_TEST(std::vector<std::string>(at - 1, at + 5) ==
                   (std::vector<std::string>{"-genv", "MASTER_ADDR", "head", "-genv", "MASTER_PORT", "1234"}),
               boost::test_tools::per_element());
    BOOST_TEST(plan.command.at(plan.command.size() - 4) == "hydra");
    // srun in an allocation: the node list is read on each rank, so MASTER_ADDR is left to lockstep-rank-env.
    env = base_env;
    env["SLURM_JOB_ID"] = "7";
    plan = ln::plan_launch(r, ml::Launcher::Srun, env, false);
    BOOST_TEST(!plan.environment.contains("MASTER_ADDR"));
    BOOST_TEST(plan.command.at(2) ==
               "--export=ALL,LOCKSTEP_CONFIG_FILE,LOCKSTEP_DEBUG_MODE,LOCKSTEP_LAUNCHER_FLAGS,LOCKSTEP_SEED,"
               "LOCKSTEP_TIMEOUT,MASTER_PORT");
    BOOST_TEST(plan.command.at(plan.command.size() - 4) == "srun");
    // Without it, the program comes right after the launcher's own words.
    r.rank_env_program.reset();
    plan = ln::plan_launch(r, ml::Launcher::OpenMpi, base_env, false);
    BOOST_TEST(!plan.environment.contains("MASTER_ADDR"));
    BOOST_TEST(plan.master_addr_source.empty());
    BOOST_TEST(plan.command.at(plan.command.size() - 3) == "LOCKSTEP_TIMEOUT");
}

BOOST_AUTO_TEST_CASE(first_host_of_a_hostfile) {
    const auto dir = std::filesystem::temp_directory_path();
    auto first = [&](const std::string& text) {
        const auto path = (dir / ("lockstep-hostfile-" + std::to_string(::getpid()))).string();
        std::ofstream(path) << text;
        auto host = ln::first_hostfile_host(path);
        std::filesystem::remove(path);
        return host;
    };
    BOOST_TEST(first("# comment\n\n  node7 slots=2 # rank 0\nnode8\n").value() == "node7");
    BOOST_TEST(first("node3:4\nnode4:4\n").value() == "node3");  // Hydra's host:count
    BOOST_TEST(first("fe80::1 slots=1\n").value() == "fe80::1");
    BOOST_TEST(!first("# nothing\n\n").has_value());
    BOOST_TEST(!ln::first_hostfile_host("/nonexistent/hostfile").has_value());
}
