// The MPI launcher toolkit shared by `lockstep launch` and `lockstep hostcheck`: which MPI a --version text names,
// the launcher command spelled for each launcher, srun's PMI plugin for an MPI library, what a failed launch's text
// says, and child processes (exit codes, signals, time limits, pipes, environment, PATH search).
#define BOOST_TEST_MODULE mpi_launcher
#include <boost/test/unit_test.hpp>

#include "mpi_launcher/child_process.hpp"
#include "mpi_launcher/flavour.hpp"
#include "mpi_launcher/launch_failure.hpp"
#include "mpi_launcher/launcher_command.hpp"
#include "mpi_launcher/pmi.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace lockstep::mpi_launcher;
using namespace std::chrono_literals;
using Words = std::vector<std::string>;

namespace lockstep::mpi_launcher {
std::ostream& operator<<(std::ostream& os, MpiFlavour f) {
    return os << to_string(f);
}
std::ostream& operator<<(std::ostream& os, Launcher l) {
    return os << to_string(l);
}
}  // namespace lockstep::mpi_launcher

namespace {

Command sh(std::string script, std::chrono::milliseconds timeout = 10s) {
    Command c;
    c.argv = {"sh", "-c", std::move(script)};
    c.timeout = timeout;
    return c;
}

// An executable script in a fresh directory, removed with the object.
class Script {
public:
    explicit Script(const std::string& body) {
        char dir_template[] = "/tmp/mpi_launcher_test.XXXXXX";
        dir_ = ::mkdtemp(dir_template);
        path_ = dir_ + "/fake-mpirun";
        std::ofstream(path_) << "#!/bin/sh\n" << body << "\n";
        ::chmod(path_.c_str(), 0755);
    }
    ~Script() { std::filesystem::remove_all(dir_); }
    Script(const Script&) = delete;
    Script& operator=(const Script&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string dir_;
    std::string path_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(flavour)

BOOST_AUTO_TEST_CASE(open_mpi_and_prrte) {
    auto m = parse_mpi_version("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n");
    BOOST_TEST(m.flavour == MpiFlavour::OpenMpi);
    BOOST_TEST(m.version == "4.1.4");
    BOOST_TEST(m.major_version() == 4);
    BOOST_TEST(m.describe() == "Open MPI 4.1.4");
    BOOST_TEST(m.version_text == "mpirun (Open MPI) 4.1.4");
    BOOST_TEST(!m.runs_on_prrte());
    // Open MPI 5's mpirun is PRRTE's, but names Open MPI.
    m = parse_mpi_version("mpirun (Open MPI) 5.0.3\n");
    BOOST_TEST(m.flavour == MpiFlavour::OpenMpi);
    BOOST_TEST(m.runs_on_prrte());
    m = parse_mpi_version("mpirun (OpenRTE) 1.10.7\n");
    BOOST_TEST(m.flavour == MpiFlavour::OpenMpi);
    BOOST_TEST(m.version == "1.10.7");
    m = parse_mpi_version("prterun (PRRTE) 3.0.5\n\nReport bugs to https://github.com/openpmix/prrte\n");
    BOOST_TEST(m.flavour == MpiFlavour::Prrte);
    BOOST_TEST(m.version == "3.0.5");
    BOOST_TEST(m.describe() == "PRRTE 3.0.5");
    BOOST_TEST(m.runs_on_prrte());
    // A bare mention names the flavour without a version.
    m = parse_mpi_version("some wrapper around Open MPI\n");
    BOOST_TEST(m.flavour == MpiFlavour::OpenMpi);
    BOOST_TEST(m.version.empty());
    BOOST_TEST(m.describe() == "Open MPI");
}

BOOST_AUTO_TEST_CASE(hydra_family) {
    auto m = parse_mpi_version(
        "HYDRA build details:\n    Version:                                 4.0.2\n"
        "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022\n");
    BOOST_TEST(m.flavour == MpiFlavour::Mpich);
    BOOST_TEST(m.version == "4.0.2");
    BOOST_TEST(m.describe() == "MPICH 4.0.2");
    m = parse_mpi_version("MPICH Version:\t4.1.2\nMPICH Release date:\tWed Jun  7 15:22:45 CDT 2023\n");
    BOOST_TEST(m.flavour == MpiFlavour::Mpich);
    BOOST_TEST(m.version == "4.1.2");
    m = parse_mpi_version("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: 1d8c1e0)\n");
    BOOST_TEST(m.flavour == MpiFlavour::IntelMpi);
    BOOST_TEST(m.version == "2021.10");
    BOOST_TEST(m.describe() == "Intel MPI 2021.10");
    // MVAPICH ships MPICH's Hydra: its name decides, wherever Hydra's details say so.
    m = parse_mpi_version("MVAPICH2 Version:     \t2.3.7\nMVAPICH2 Release date:\tWed March 02 22:00:00 EST 2022\n");
    BOOST_TEST(m.flavour == MpiFlavour::Mvapich);
    BOOST_TEST(m.version == "2.3.7");
    BOOST_TEST(m.describe() == "MVAPICH 2.3.7");
    m = parse_mpi_version(
        "HYDRA build details:\n    Version: 3.2.1\n    Release Date: x\n    Configure options: "
        "'--prefix=/opt/MVAPICH2'\n");
    BOOST_TEST(m.flavour == MpiFlavour::Mvapich);
}

BOOST_AUTO_TEST_CASE(unknown_none_and_the_lines_read) {
    auto m = parse_mpi_version("something else 1.0\n");
    BOOST_TEST(m.flavour == MpiFlavour::Unknown);
    BOOST_TEST(m.describe() == "unknown MPI (something else 1.0)");
    BOOST_TEST(parse_mpi_version("").flavour == MpiFlavour::None);
    BOOST_TEST(parse_mpi_version("").describe() == "none");
    // Only the first lines are read: a remote node's answer is cut to them, and must read like the local one.
    std::string text;
    for (std::size_t i = 0; i < version_text_lines; ++i) text += "banner line\n";
    BOOST_TEST(parse_mpi_version(text + "mpirun (Open MPI) 4.1.4\n").flavour == MpiFlavour::Unknown);
}

BOOST_AUTO_TEST_CASE(names_in_reports_are_fixed) {
    BOOST_TEST(to_string(MpiFlavour::OpenMpi) == "openmpi");
    BOOST_TEST(to_string(MpiFlavour::Mpich) == "mpich");
    BOOST_TEST(to_string(MpiFlavour::IntelMpi) == "intelmpi");
    BOOST_TEST(to_string(MpiFlavour::Mvapich) == "mvapich");
    BOOST_TEST(to_string(MpiFlavour::Prrte) == "prrte");
    BOOST_TEST(to_string(MpiFlavour::Unknown) == "unknown");
    BOOST_TEST(to_string(MpiFlavour::None) == "none");
    for (auto l : {Launcher::OpenMpi, Launcher::Hydra, Launcher::Srun}) BOOST_TEST((parse_launcher(to_string(l)) == l));
    BOOST_TEST(to_string(Launcher::OpenMpi) == "openmpi");
    BOOST_TEST(to_string(Launcher::Hydra) == "hydra");
    BOOST_TEST(to_string(Launcher::Srun) == "srun");
    BOOST_TEST(!parse_launcher("auto").has_value());
    BOOST_TEST(!parse_launcher("OpenMpi").has_value());
}

BOOST_AUTO_TEST_CASE(launcher_of_each_flavour) {
    BOOST_TEST((launcher_for(MpiFlavour::OpenMpi) == Launcher::OpenMpi));
    BOOST_TEST((launcher_for(MpiFlavour::Prrte) == Launcher::OpenMpi));
    BOOST_TEST((launcher_for(MpiFlavour::Mpich) == Launcher::Hydra));
    BOOST_TEST((launcher_for(MpiFlavour::IntelMpi) == Launcher::Hydra));
    BOOST_TEST((launcher_for(MpiFlavour::Mvapich) == Launcher::Hydra));
    BOOST_TEST(!launcher_for(MpiFlavour::Unknown).has_value());
    BOOST_TEST(!launcher_for(MpiFlavour::None).has_value());
}

BOOST_AUTO_TEST_CASE(asks_the_launcher_itself) {
    // Some wrappers print their version on stderr: it is read as the terminal would show it.
    const Script fake("echo 'mpirun (Open MPI) 4.1.6' >&2; echo; echo 'Report bugs to http://www.open-mpi.org/'");
    const std::string out = version_output(fake.path(), 10s);
    BOOST_TEST(out.starts_with("mpirun (Open MPI) 4.1.6\n"));
    BOOST_TEST(parse_mpi_version(out).version == "4.1.6");
    BOOST_TEST(version_output("/nonexistent/mpirun", 10s).empty());
    // A launcher that hangs is stopped at the time limit.
    const Script hung("sleep 30");
    const auto start = Clock::now();
    BOOST_TEST(version_output(hung.path(), 300ms).empty());
    BOOST_TEST(Seconds(Clock::now() - start).count() < 5.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(launcher_command)

namespace {
Words same_request(Launcher launcher, const std::string& program) {
    LauncherCommand command(launcher, program);
    command.allow_run_as_root().processes(4).hostfile("hosts").per_node(2).forward({{"A", "1"}, {"B", "x,y"}});
    command.arguments({"--tag-output"}).arguments({"./train", "--debug"});
    return command.argv();
}
}  // namespace

BOOST_AUTO_TEST_CASE(each_launcher_spells_the_same_request) {
    BOOST_TEST(same_request(Launcher::OpenMpi, "mpirun") ==
                   (Words{"mpirun", "--allow-run-as-root", "-np", "4", "--hostfile", "hosts", "--map-by", "ppr:2:node",
                          "-x", "A", "-x", "B", "--tag-output", "./train", "--debug"}),
               boost::test_tools::per_element());
    BOOST_TEST(same_request(Launcher::Hydra, "/opt/mpich/bin/mpirun") ==
                   (Words{"/opt/mpich/bin/mpirun", "-n", "4", "-f", "hosts", "-ppn", "2", "-genv", "A", "1", "-genv",
                          "B", "x,y", "--tag-output", "./train", "--debug"}),
               boost::test_tools::per_element());
    BOOST_TEST(
        same_request(Launcher::Srun, "srun") == (Words{"srun", "--ntasks=4", "--nodefile=hosts", "--ntasks-per-node=2",
                                                       "--export=ALL,A,B", "--tag-output", "./train", "--debug"}),
        boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(order_is_the_callers) {
    LauncherCommand command(Launcher::OpenMpi, "mpirun");
    command.hostfile("h").processes(2).per_node(1).allow_run_as_root();
    BOOST_TEST(command.argv() ==
                   (Words{"mpirun", "--hostfile", "h", "-np", "2", "--map-by", "ppr:1:node", "--allow-run-as-root"}),
               boost::test_tools::per_element());
    BOOST_TEST(command.launcher() == Launcher::OpenMpi);
}

BOOST_AUTO_TEST_CASE(nodes_and_host_lists) {
    LauncherCommand srun(Launcher::Srun, "srun");
    srun.nodes(2).per_node(1).host_list({"a", "b"}).arguments({"hostname"});
    BOOST_TEST(srun.argv() == (Words{"srun", "-N", "2", "--ntasks-per-node=1", "-w", "a,b", "hostname"}),
               boost::test_tools::per_element());
    LauncherCommand ompi(Launcher::OpenMpi, "mpirun");
    ompi.host_list({"a", "b"});
    BOOST_TEST(ompi.argv() == (Words{"mpirun", "--host", "a,b"}), boost::test_tools::per_element());
    LauncherCommand hydra(Launcher::Hydra, "mpiexec");
    hydra.host_list({"a", "b"});
    BOOST_TEST(hydra.argv() == (Words{"mpiexec", "-hosts", "a,b"}), boost::test_tools::per_element());
    BOOST_CHECK_THROW(LauncherCommand(Launcher::OpenMpi, "mpirun").nodes(2), std::logic_error);
    BOOST_CHECK_THROW(LauncherCommand(Launcher::Hydra, "mpiexec").nodes(2), std::logic_error);
}

BOOST_AUTO_TEST_CASE(remote_shell_per_runtime) {
    const auto ompi4 = parse_mpi_version("mpirun (Open MPI) 4.1.4");
    const auto ompi5 = parse_mpi_version("mpirun (Open MPI) 5.0.3");
    const auto prrte = parse_mpi_version("prterun (PRRTE) 3.0.5");
    const auto mpich = parse_mpi_version("HYDRA build details:\n    Version: 4.0.2\n");
    auto agent = [](Launcher l, const MpiInstall& mpi) {
        LauncherCommand c(l, "mpirun");
        c.remote_shell("ssh -F /c", mpi);
        return Words(c.argv().begin() + 1, c.argv().end());
    };
    BOOST_TEST(agent(Launcher::OpenMpi, ompi4) == (Words{"--mca", "plm_rsh_agent", "ssh -F /c"}),
               boost::test_tools::per_element());
    BOOST_TEST(agent(Launcher::OpenMpi, ompi5) == (Words{"--mca", "plm_ssh_agent", "ssh -F /c"}),
               boost::test_tools::per_element());
    BOOST_TEST(agent(Launcher::OpenMpi, prrte) == (Words{"--mca", "plm_ssh_agent", "ssh -F /c"}),
               boost::test_tools::per_element());
    BOOST_TEST(agent(Launcher::Hydra, mpich) == (Words{"-launcher", "ssh", "-launcher-exec", "ssh -F /c"}),
               boost::test_tools::per_element());
    BOOST_CHECK_THROW(agent(Launcher::Srun, mpich), std::logic_error);
}

BOOST_AUTO_TEST_CASE(a_value_on_the_ranks_only) {
    LauncherCommand ompi(Launcher::OpenMpi, "mpirun");
    ompi.set_on_ranks("LD_PRELOAD", "/a.so");
    BOOST_TEST(ompi.argv() == (Words{"mpirun", "-x", "LD_PRELOAD=/a.so"}), boost::test_tools::per_element());
    LauncherCommand hydra(Launcher::Hydra, "mpiexec");
    hydra.set_on_ranks("LD_PRELOAD", "/a.so");
    BOOST_TEST(hydra.argv() == (Words{"mpiexec", "-genv", "LD_PRELOAD", "/a.so"}), boost::test_tools::per_element());
    LauncherCommand srun(Launcher::Srun, "srun");
    srun.forward({{"A", "1"}}).set_on_ranks("LD_PRELOAD", "/a.so");
    BOOST_TEST(srun.argv() == (Words{"srun", "--export=ALL,A,LD_PRELOAD=/a.so"}), boost::test_tools::per_element());
    LauncherCommand alone(Launcher::Srun, "srun");
    alone.set_on_ranks("LD_PRELOAD", "/a.so");
    BOOST_TEST(alone.argv().back() == "--export=ALL,LD_PRELOAD=/a.so");
}

BOOST_AUTO_TEST_CASE(root_and_empty_forwarding) {
    for (auto l : {Launcher::Hydra, Launcher::Srun}) {
        LauncherCommand c(l, "x");
        c.allow_run_as_root();
        BOOST_TEST(c.argv().size() == 1u);
    }
    LauncherCommand srun(Launcher::Srun, "srun");
    srun.forward({});
    BOOST_TEST(srun.argv().back() == "--export=ALL");
    LauncherCommand ompi(Launcher::OpenMpi, "mpirun");
    ompi.forward({});
    BOOST_TEST(ompi.argv().size() == 1u);
}

BOOST_AUTO_TEST_CASE(oversubscribe_and_pmi) {
    LauncherCommand ompi(Launcher::OpenMpi, "mpirun");
    ompi.processes(3).oversubscribe();
    BOOST_TEST(ompi.argv() == (Words{"mpirun", "-np", "3", "--oversubscribe"}), boost::test_tools::per_element());
    LauncherCommand hydra(Launcher::Hydra, "mpiexec");
    hydra.oversubscribe();
    BOOST_TEST(hydra.argv().size() == 1u);  // Hydra never refuses more ranks than cores
    LauncherCommand srun(Launcher::Srun, "srun");
    srun.processes(2).pmi("pmix").oversubscribe();
    BOOST_TEST(srun.argv() == (Words{"srun", "--ntasks=2", "--mpi=pmix", "--overcommit"}),
               boost::test_tools::per_element());
    BOOST_CHECK_THROW(LauncherCommand(Launcher::OpenMpi, "mpirun").pmi("pmix"), std::logic_error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pmi)

// `ompi_info --parsable` of Debian 12's Open MPI, cut to the lines that matter and some around them.
constexpr const char* debian_ompi_info =
    "package:Debian OpenMPI\n"
    "ompi:version:full:4.1.4\n"
    "ompi:version:repo:v4.1.4\n"
    "mca:pmix:ext3x:version:\"mca:2.1.0\"\n"
    "mca:pmix:ext3x:version:\"api:2.0.0\"\n"
    "mca:pmix:isolated:version:\"mca:2.1.0\"\n"
    "mca:pmix:flux:version:\"mca:2.1.0\"\n"
    "mca:ess:pmi:version:\"mca:2.1.0\"\n"
    "mca:ess:slurm:version:\"mca:2.1.0\"\n"
    "mca:plm:slurm:version:\"mca:2.1.0\"\n";

BOOST_AUTO_TEST_CASE(reads_ompi_info) {
    auto pmi = parse_ompi_info_pmi(debian_ompi_info);
    BOOST_TEST(pmi.version == "4.1.4");
    BOOST_TEST(pmi.pmix);
    BOOST_TEST(!pmi.pmi2);
    BOOST_TEST(!pmi.pmi1);
    BOOST_TEST(pmi.components == (Words{"ext3x", "isolated", "flux"}), boost::test_tools::per_element());
    // Built --with-pmi against Slurm's libraries, without PMIx.
    pmi = parse_ompi_info_pmi(
        "ompi:version:full:4.0.7\nmca:pmix:s1:version:x\nmca:pmix:s2:version:x\n"
        "mca:pmix:isolated:version:x\n");
    BOOST_TEST(!pmi.pmix);
    BOOST_TEST(pmi.pmi2);
    BOOST_TEST(pmi.pmi1);
    // The bundled PMIx of a source build.
    BOOST_TEST(parse_ompi_info_pmi("ompi:version:full:4.1.6\nmca:pmix:pmix3x:version:x\n").pmix);
    // Open MPI 5 has no pmix framework: PMIx is built in.
    pmi = parse_ompi_info_pmi("ompi:version:full:5.0.3\nmca:btl:tcp:version:x\n");
    BOOST_TEST(pmi.pmix);
    BOOST_TEST(pmi.components.empty());
    // Nothing known; "isolated" (a singleton) and "pmix" alone are no client.
    pmi = parse_ompi_info_pmi("mca:pmix:isolated:version:x\nmca:pmix:pmix:version:x\ngarbage\n\n");
    BOOST_TEST(pmi.version.empty());
    BOOST_TEST(!pmi.pmix);
}

BOOST_AUTO_TEST_CASE(reads_srun_mpi_list) {
    // Slurm 22.05 (Debian 12).
    BOOST_TEST(parse_srun_mpi_list("MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n"
                                   "specific pmix plugin versions available: pmix_v4\n") ==
                   (Words{"pmix", "none", "cray_shasta", "pmi2", "pmix_v4"}),
               boost::test_tools::per_element());
    // Slurm 20.11 and older print everything through their log prefix.
    BOOST_TEST(parse_srun_mpi_list("srun: MPI types are...\nsrun: none\nsrun: pmi2\nsrun: pmix_v3\nsrun: pmix\n") ==
                   (Words{"none", "pmi2", "pmix_v3", "pmix"}),
               boost::test_tools::per_element());
    // Several versions on one line; errors are no plugins.
    BOOST_TEST(
        parse_srun_mpi_list("MPI plugin types are...\n\tnone\nspecific pmix plugin versions available: "
                            "pmix_v3,pmix_v4\nsrun: error: something\n") == (Words{"none", "pmix_v3", "pmix_v4"}),
        boost::test_tools::per_element());
    BOOST_TEST(parse_srun_mpi_list("").empty());
}

BOOST_AUTO_TEST_CASE(chooses_what_the_library_was_built_for) {
    const Words slurm_2205{"pmix", "none", "cray_shasta", "pmi2", "pmix_v4"};
    const auto ompi4 = parse_mpi_version("mpirun (Open MPI) 4.1.4");
    const auto ompi5 = parse_mpi_version("mpirun (Open MPI) 5.0.3");
    const auto mpich = parse_mpi_version("HYDRA build details:\n    Version: 4.0.2\n");

    // Debian 12: Open MPI with PMIx only, Slurm with pmix and pmi2.
    auto choice = choose_srun_pmi(ompi4, parse_ompi_info_pmi(debian_ompi_info), slurm_2205);
    BOOST_TEST(choice.plugin.value_or("") == "pmix");
    BOOST_TEST(choice.reason.find("Open MPI 4.1.4 speaks PMIx (ompi_info)") != std::string::npos);
    BOOST_TEST(!choice.warning.has_value());
    // Only a versioned PMIx plugin.
    choice = choose_srun_pmi(ompi4, parse_ompi_info_pmi(debian_ompi_info), Words{"none", "pmi2", "pmix_v3"});
    BOOST_TEST(choice.plugin.value_or("") == "pmix_v3");
    // Built with Slurm's PMI-2 only.
    const auto pmi2_only = parse_ompi_info_pmi("ompi:version:full:4.0.7\nmca:pmix:s2:version:x\n");
    choice = choose_srun_pmi(ompi4, pmi2_only, slurm_2205);
    BOOST_TEST(choice.plugin.value_or("") == "pmi2");
    // PMIx only, and a Slurm without its PMIx plugin: nothing fits, and the warning says what to do.
    choice = choose_srun_pmi(ompi4, parse_ompi_info_pmi(debian_ompi_info), Words{"none", "pmi2"});
    BOOST_TEST(!choice.plugin.has_value());
    BOOST_TEST(choice.warning.value_or("").find("only none, pmi2") != std::string::npos);
    BOOST_TEST(choice.warning.value_or("").find("--launcher openmpi") != std::string::npos);
    // Built with no PMI that srun serves.
    choice = choose_srun_pmi(ompi4, parse_ompi_info_pmi("ompi:version:full:4.1.4\nmca:pmix:isolated:version:x\n"),
                             slurm_2205);
    BOOST_TEST(!choice.plugin.has_value());
    BOOST_TEST(choice.warning.value_or("").find("without any PMI that srun serves") != std::string::npos);
    // Open MPI 5 speaks PMIx without ompi_info; without srun --mpi=list the choice is the library's.
    choice = choose_srun_pmi(ompi5, std::nullopt, std::nullopt);
    BOOST_TEST(choice.plugin.value_or("") == "pmix");
    BOOST_TEST(choice.reason.find("could not be asked") != std::string::npos);
    // ompi_info alone (no mpirun on PATH) names the library.
    choice = choose_srun_pmi(MpiInstall{}, parse_ompi_info_pmi(debian_ompi_info), slurm_2205);
    BOOST_TEST(choice.plugin.value_or("") == "pmix");
    // MPICH speaks the PMI-1/PMI-2 wire protocol that srun's pmi2 serves.
    choice = choose_srun_pmi(mpich, std::nullopt, slurm_2205);
    BOOST_TEST(choice.plugin.value_or("") == "pmi2");
    BOOST_TEST(choice.reason.find("MPICH 4.0.2") != std::string::npos);
    // An unknown MPI: Slurm's own default.
    choice = choose_srun_pmi(MpiInstall{}, std::nullopt, slurm_2205);
    BOOST_TEST(!choice.plugin.has_value());
    BOOST_TEST(choice.reason.find("MpiDefault") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(launch_failure)

BOOST_AUTO_TEST_CASE(recognises_the_launchers_texts) {
    // Open MPI 4.1's mpirun, more processes than cores.
    BOOST_TEST((recognise_launch_failure("-----------------------------------------------------------------------\n"
                                         "There are not enough slots available in the system to satisfy the 3\n"
                                         "slots that were requested by the application:\n\n  true\n") ==
                LaunchFailure::NotEnoughSlots));
    // An Open MPI rank started by srun without a PMI plugin it can use.
    BOOST_TEST(
        (recognise_launch_failure("[vm:28741] OPAL ERROR: Unreachable in file ext3x_client.c at line 112\n"
                                  "The application appears to have been direct launched using \"srun\",\n"
                                  "but OMPI was not built with SLURM's PMI support and therefore cannot\nexecute.\n"
                                  "*** An error occurred in MPI_Init_thread\n") == LaunchFailure::PmiMissing));
    BOOST_TEST((recognise_launch_failure("PMIX ERROR: UNREACHABLE in file client/pmix_client.c\n"
                                         "*** An error occurred in MPI_Init\n") == LaunchFailure::PmiInit));
    BOOST_TEST((recognise_launch_failure("mpirun was unable to launch the specified application as it could not "
                                         "access\nor execute an executable:\n") == LaunchFailure::ProgramNotFound));
    BOOST_TEST((recognise_launch_failure("slurmstepd-n1: error: execve(): ./x: No such file or directory\n") ==
                LaunchFailure::ProgramNotFound));
    BOOST_TEST((recognise_launch_failure("lockstep-rank-env: cannot execute './x': No such file or directory\n") ==
                LaunchFailure::ProgramNotFound));
    // A program's own failure is none of these, nor is a PMIx word outside MPI_Init.
    BOOST_TEST((recognise_launch_failure("Traceback: ValueError\n") == LaunchFailure::None));
    BOOST_TEST((recognise_launch_failure("PMIX_RANK=3\n") == LaunchFailure::None));
    BOOST_TEST((recognise_launch_failure(std::string(1 << 20, 'x')) == LaunchFailure::None));
}

BOOST_AUTO_TEST_CASE(hydra_names_the_signal_that_ended_a_rank) {
    const std::string banner =
        "=   EXIT CODE: 9\n====\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)\n"
        "This typically refers to a problem with your application.\n";
    BOOST_TEST(hydra_exit_status(9, banner) == 128 + 9);
    BOOST_TEST(hydra_exit_status(15, "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Terminated (signal 15)") ==
               128 + 15);
    // A rank that exited 9 itself, a status the line does not name, a line cut short: the status as it is.
    BOOST_TEST(hydra_exit_status(9, "rank 1 exited\n") == 9);
    BOOST_TEST(hydra_exit_status(3, banner) == 3);
    BOOST_TEST(hydra_exit_status(9, "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9") == 9);
    BOOST_TEST(hydra_exit_status(9, "TERMINATED WITH THE EXIT STRING: x\n(signal 9)") == 9);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(child_process)

BOOST_AUTO_TEST_CASE(exit_codes_and_streams) {
    auto r = run_command(sh("echo out; echo err >&2; exit 3"));
    BOOST_TEST((r.ending == CommandResult::Ending::Exited));
    BOOST_TEST(r.exit_code == 3);
    BOOST_TEST(r.out == "out\n");
    BOOST_TEST(r.err == "err\n");
    r = run_command(sh("kill -KILL $$"));
    BOOST_TEST((r.ending == CommandResult::Ending::Signalled));
    BOOST_TEST(r.signal == SIGKILL);
}

BOOST_AUTO_TEST_CASE(merged_output_keeps_the_order) {
    Command c = sh("echo one; echo two >&2; echo three");
    c.merge_output = true;
    const auto r = run_command(c);
    BOOST_TEST(r.out == "one\ntwo\nthree\n");
    BOOST_TEST(r.err.empty());
    BOOST_TEST(r.exit_code == 0);
}

BOOST_AUTO_TEST_CASE(time_limit_stops_the_child) {
    const auto start = Clock::now();
    const auto r = run_command(sh("echo started; sleep 30", 300ms));
    BOOST_TEST((r.ending == CommandResult::Ending::TimedOut));
    BOOST_TEST(r.out == "started\n");
    BOOST_TEST(Seconds(Clock::now() - start).count() < 5.0);
}

BOOST_AUTO_TEST_CASE(spawn_failure_is_a_result) {
    Command c;
    c.argv = {"lockstep-no-such-program"};
    const auto r = run_command(c);
    BOOST_TEST((r.ending == CommandResult::Ending::SpawnFailed));
    BOOST_TEST(r.spawn_error.find("cannot run 'lockstep-no-such-program'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(input_and_environment) {
    Command c = sh("read line; echo \"$line $LAUNCHER_TEST_VALUE\"");
    c.input = "hello\n";
    c.environment = {{"LAUNCHER_TEST_VALUE", "world"}};
    BOOST_TEST(run_command(c).out == "hello world\n");
}

BOOST_AUTO_TEST_CASE(foreground_child_status) {
    const std::map<std::string, std::string> env{{"PATH", "/usr/bin:/bin"}, {"ONLY", "this"}};
    BOOST_TEST(run_in_foreground({"sh", "-c", "exit 7"}, env) == 7);
    BOOST_TEST(run_in_foreground({"sh", "-c", "kill -TERM $$"}, env) == 128 + SIGTERM);
    // SIGTERM sent to this process is passed on; a child that then exits 0 was stopped, not finished: 128 + SIGTERM.
    // One that exits non-zero keeps its own status.
    const std::string stop_parent = "kill -TERM $PPID; while :; do sleep 0.1; done";
    BOOST_TEST(run_in_foreground({"sh", "-c", "trap 'exit 0' TERM; " + stop_parent}, env) == 128 + SIGTERM);
    BOOST_TEST(run_in_foreground({"sh", "-c", "trap 'exit 3' TERM; " + stop_parent}, env) == 3);
    // Exactly the environment given, nothing inherited.
    ::setenv("LAUNCHER_TEST_INHERITED", "1", 1);
    BOOST_TEST(run_in_foreground({"sh", "-c", "test \"$ONLY\" = this && test -z \"$LAUNCHER_TEST_INHERITED\""}, env) ==
               0);
    try {
        (void)run_in_foreground({"lockstep-no-such-program"}, env);
        BOOST_FAIL("a missing program must throw");
    } catch (const SpawnError& e) {
        const std::string what = e.what();
        BOOST_TEST(what.find("cannot start 'lockstep-no-such-program'") != std::string::npos);
        BOOST_TEST(what.find("not found on PATH") != std::string::npos);
    }
}

// A scope in which one of this process's streams (stderr unless told) goes to a file (the watched child's is copied
// there).
class StreamToFile {
public:
    explicit StreamToFile(int fd = STDERR_FILENO) : fd_(fd), file_(std::tmpfile()) {
        std::fflush(nullptr);
        saved_ = ::dup(fd_);
        ::dup2(::fileno(file_), fd_);
    }
    ~StreamToFile() {
        restore();
        std::fclose(file_);
    }
    StreamToFile(const StreamToFile&) = delete;
    StreamToFile& operator=(const StreamToFile&) = delete;
    std::string text() {
        restore();
        std::string out;
        std::rewind(file_);
        for (int c = std::fgetc(file_); c != EOF; c = std::fgetc(file_)) out.push_back(static_cast<char>(c));
        return out;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        ::dup2(saved_, fd_);
        ::close(saved_);
        saved_ = -1;
    }
    int fd_;
    std::FILE* file_;
    int saved_ = -1;
};

BOOST_AUTO_TEST_CASE(foreground_stderr_is_passed_on_and_kept) {
    const std::map<std::string, std::string> env{{"PATH", "/usr/bin:/bin"}};
    StreamToFile captured;
    const auto r = run_in_foreground_watching_stderr({"sh", "-c", "echo to-out; echo to-err >&2; exit 5"}, env);
    const std::string passed_on = captured.text();
    BOOST_TEST(r.status == 5);
    BOOST_TEST(r.stderr_head == "to-err\n");
    BOOST_TEST(r.stderr_tail.empty());
    BOOST_TEST(passed_on == "to-err\n");
    // Past the head's limit, the start and the end are kept; everything is passed on.
    StreamToFile large;
    const auto big = run_in_foreground_watching_stderr(
        {"sh", "-c", "echo first >&2; head -c 600000 /dev/zero | tr '\\0' x >&2; echo last >&2; kill -TERM $$"}, env);
    const std::string all = large.text();
    BOOST_TEST(big.status == 128 + SIGTERM);
    BOOST_TEST(big.stderr_head.size() == stderr_head_limit);
    BOOST_TEST(big.stderr_head.starts_with("first\n"));
    BOOST_TEST(big.stderr_tail.size() == stderr_tail_limit);
    BOOST_TEST(big.stderr_tail.ends_with("xlast\n"));
    BOOST_TEST(all.size() == 600000u + 11u);
    BOOST_CHECK_THROW((void)run_in_foreground_watching_stderr({"lockstep-no-such-program"}, env), SpawnError);
    BOOST_TEST(r.stdout_end.empty());
    // watch_stdout: stdout is passed on too, and its end kept.
    StreamToFile out(STDOUT_FILENO);
    const auto watched =
        run_in_foreground_watching_stderr({"sh", "-c", "echo to-out; echo to-err >&2; exit 5"}, env, true);
    BOOST_TEST(out.text() == "to-out\n");
    BOOST_TEST(watched.status == 5);
    BOOST_TEST(watched.stdout_end == "to-out\n");
    BOOST_TEST(watched.stderr_head == "to-err\n");
}

BOOST_AUTO_TEST_CASE(path_search) {
    const std::string found = find_program("sh");
    BOOST_TEST(found.ends_with("/sh"));
    BOOST_TEST(::access(found.c_str(), X_OK) == 0);
    BOOST_TEST(find_program("/bin/sh") == "/bin/sh");
    BOOST_TEST(find_program("lockstep-no-such-program").empty());
    BOOST_TEST(find_program("/tmp").empty());  // a directory is not a program
    BOOST_TEST(find_program("").empty());
}

BOOST_AUTO_TEST_SUITE_END()
