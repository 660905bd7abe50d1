// How `lockstep hostcheck` reads what ssh, the probe script, the mesh loop and mpirun print: every problem code from
// the exact texts OpenSSH and glibc produce, the remedy of each, and the parsers of the remote answers.
#define BOOST_TEST_MODULE hostcheck_diagnosis
#include <boost/test/unit_test.hpp>

#include "local_checks.hpp"
#include "mesh.hpp"
#include "mpi_install.hpp"
#include "mpirun_check.hpp"
#include "probe.hpp"
#include "problem.hpp"
#include "resolve.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace lockstep::hostcheck;
using namespace lockstep::mpi_launcher;

namespace {

struct Sample {
    Problem expected;
    const char* text;
    const char* decisive;  // the line the table shows
};

// Texts as OpenSSH 8.x/9.x and glibc print them.
const std::vector<Sample> samples{
    {Problem::Dns, "ssh: Could not resolve hostname nosuchhost.invalid: Name or service not known\n",
     "ssh: Could not resolve hostname nosuchhost.invalid: Name or service not known"},
    {Problem::Dns, "ssh: Could not resolve hostname n1: Temporary failure in name resolution\n",
     "ssh: Could not resolve hostname n1: Temporary failure in name resolution"},
    {Problem::Refused, "ssh: connect to host 127.0.1.17 port 22: Connection refused\n",
     "ssh: connect to host 127.0.1.17 port 22: Connection refused"},
    {Problem::Timeout, "ssh: connect to host 10.1.1.1 port 22: Connection timed out\n",
     "ssh: connect to host 10.1.1.1 port 22: Connection timed out"},
    {Problem::Timeout, "Connection timed out during banner exchange\nConnection to 127.0.1.18 port 22 timed out\n",
     "Connection timed out during banner exchange"},
    {Problem::NoRoute, "ssh: connect to host 10.9.9.9 port 22: No route to host\n",
     "ssh: connect to host 10.9.9.9 port 22: No route to host"},
    {Problem::NoRoute, "ssh: connect to host fd00::9 port 22: Network is unreachable\n",
     "ssh: connect to host fd00::9 port 22: Network is unreachable"},
    {Problem::HostKeyUnknown,
     "No ED25519 host key is known for [127.0.1.14]:2222 and you have requested strict checking.\n"
     "Host key verification failed.\n",
     "No ED25519 host key is known for [127.0.1.14]:2222 and you have requested strict checking."},
    {Problem::HostKeyUnknown, "Host key verification failed.\n", "Host key verification failed."},
    {Problem::HostKeyChanged,
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n"
     "Offending ED25519 key in /root/.ssh/known_hosts:3\n"
     "Host key for [127.0.1.19]:2222 has changed and you have requested strict checking.\n"
     "Host key verification failed.\n",
     "Host key for [127.0.1.19]:2222 has changed and you have requested strict checking."},
    {Problem::AuthDenied, "root@127.0.1.15: Permission denied (publickey).\n",
     "root@127.0.1.15: Permission denied (publickey)."},
    {Problem::AuthDenied, "Received disconnect from 10.0.0.5 port 22:2: Too many authentication failures\n",
     "Received disconnect from 10.0.0.5 port 22:2: Too many authentication failures"},
    {Problem::KeyPermissions,
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @\n"
     "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
     "Permissions 0644 for '/home/u/.ssh/id_ed25519' are too open.\n"
     "It is required that your private key files are NOT accessible by others.\n"
     "This private key will be ignored.\n"
     "Load key \"/home/u/.ssh/id_ed25519\": bad permissions\n"
     "u@n1: Permission denied (publickey).\n",
     "Permissions 0644 for '/home/u/.ssh/id_ed25519' are too open."},
    {Problem::KeyPermissions, "Bad owner or permissions on /home/u/.ssh/config\n",
     "Bad owner or permissions on /home/u/.ssh/config"},
    {Problem::ConnectionClosed, "kex_exchange_identification: Connection closed by remote host\n",
     "kex_exchange_identification: Connection closed by remote host"},
    {Problem::ConnectionClosed,
     "kex_exchange_identification: read: Connection reset by peer\nConnection reset by 127.0.1.21 port 22\n",
     "kex_exchange_identification: read: Connection reset by peer"},
    {Problem::ConnectionClosed, "Connection closed by 10.0.0.3 port 22\n", "Connection closed by 10.0.0.3 port 22"},
    {Problem::Other, "ssh: unknown option -- Z\nusage: ssh [-46AaCfGgKkMNnqsTtVvXxYy]\n",
     "usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy]"},
};

CommandResult exited(int code, std::string out, std::string err) {
    CommandResult r;
    r.ending = CommandResult::Ending::Exited;
    r.exit_code = code;
    r.out = std::move(out);
    r.err = std::move(err);
    return r;
}

std::string probe_output(const std::string& programs, bool complete = true) {
    return std::string(probe_begin) + "\nhostname node7\npath /usr/bin:/bin\n" + programs +
           "version mpirun (Open MPI) 4.1.4\nversion \nversion Report bugs to "
           "http://www.open-mpi.org/community/help/\n" +
           (complete ? std::string(probe_end) + "\n" : "");
}

const std::vector<std::string> orted{"orted"};

}  // namespace

BOOST_AUTO_TEST_CASE(every_problem_code_from_ssh_text) {
    for (const auto& s : samples) {
        const auto c = classify_ssh_error(s.text);
        BOOST_TEST(to_string(c.problem) == to_string(s.expected), s.text);
        BOOST_TEST(c.line == s.decisive, s.text);
    }
}

BOOST_AUTO_TEST_CASE(codes_round_trip_and_every_code_has_a_remedy) {
    RemedyContext c;
    c.host = "n1";
    c.port = 2222;
    c.user = "alice";
    c.known_hosts = "/etc/cluster/known_hosts";
    c.key_file = "/home/alice/.ssh/id_ed25519";
    c.missing_daemon = "orted";
    for (auto p : {Problem::Dns, Problem::Refused, Problem::Timeout, Problem::NoRoute, Problem::HostKeyUnknown,
                   Problem::HostKeyChanged, Problem::AuthDenied, Problem::KeyPermissions, Problem::ConnectionClosed,
                   Problem::RemoteMpiMissing, Problem::SameMachine, Problem::MpiMismatch, Problem::Other}) {
        const std::string code(to_string(p));
        BOOST_TEST((problem_from_string(code) == p), code);
        BOOST_TEST(remedy_for(p, c).size() > 40u, code);
    }
    BOOST_TEST(!problem_from_string("nope").has_value());
    BOOST_TEST(remedy_for(Problem::HostKeyUnknown, c).find("ssh-keyscan -p 2222 n1 >> /etc/cluster/known_hosts") !=
               std::string::npos);
    BOOST_TEST(remedy_for(Problem::HostKeyChanged, c).find("ssh-keygen -R '[n1]:2222'") != std::string::npos);
    BOOST_TEST(
        remedy_for(Problem::AuthDenied, c).find("ssh-copy-id -p 2222 -i /home/alice/.ssh/id_ed25519.pub alice@n1") !=
        std::string::npos);
    BOOST_TEST(remedy_for(Problem::KeyPermissions, c).find("chmod 600 /home/alice/.ssh/id_ed25519") !=
               std::string::npos);
    BOOST_TEST(remedy_for(Problem::Refused, c).find("port 2222") != std::string::npos);
    BOOST_TEST(remedy_for(Problem::RemoteMpiMissing, c).find("orted") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(evidence_keeps_the_end) {
    const std::string long_text = std::string(10000, 'x') + "\nthe decisive line\n";
    const auto clipped = clip_evidence(long_text, 100);
    BOOST_TEST(clipped.size() <= 110u);
    BOOST_TEST(clipped.find("the decisive line") != std::string::npos);
    BOOST_TEST(clip_evidence("short\n") == "short");
}

BOOST_AUTO_TEST_SUITE(probe)

BOOST_AUTO_TEST_CASE(remote_facts) {
    const auto facts = parse_probe_output(
        "motd noise\n" + probe_output("program mpirun /usr/bin/mpirun\nprogram orted /usr/bin/orted\n"));
    BOOST_TEST_REQUIRE(facts.has_value());
    BOOST_TEST(facts->hostname == "node7");
    BOOST_TEST(facts->path == "/usr/bin:/bin");
    BOOST_TEST(facts->programs.at("orted") == "/usr/bin/orted");
    BOOST_TEST(facts->complete);
    BOOST_TEST(facts->mpi.describe() == "Open MPI 4.1.4");
    BOOST_TEST(facts->mpi.launcher_path == "/usr/bin/mpirun");
    BOOST_TEST(!parse_probe_output("Permission denied\n").has_value());
    BOOST_TEST(!parse_probe_output(probe_output("", false))->complete);
}

BOOST_AUTO_TEST_CASE(sentinel_separates_ssh_from_the_remote_command) {
    // Exit 255 with the sentinel: the remote command's own status, the node was reached.
    auto o =
        judge_probe(exited(255, probe_output("program orted /usr/bin/orted\n"), ""), orted, std::chrono::seconds(5));
    BOOST_TEST(o.reached);
    BOOST_TEST(!o.problem.has_value());
    // Exit 255 without it: ssh's own failure.
    o = judge_probe(exited(255, "", "ssh: connect to host h port 22: Connection refused\n"), orted,
                    std::chrono::seconds(5));
    BOOST_TEST(!o.reached);
    BOOST_TEST(to_string(*o.problem) == "refused");
    BOOST_TEST(o.evidence == "ssh: connect to host h port 22: Connection refused");
}

BOOST_AUTO_TEST_CASE(launcher_daemon_missing_on_the_remote_path) {
    const auto o =
        judge_probe(exited(0, probe_output("program mpirun /opt/x/mpirun\n"), ""), orted, std::chrono::seconds(5));
    BOOST_TEST(o.reached);
    BOOST_TEST(to_string(*o.problem) == "remote_mpi_missing");
    BOOST_TEST(o.evidence.find("orted not found on the non-interactive PATH=/usr/bin:/bin") != std::string::npos);
    BOOST_TEST(o.missing_daemon == "orted");
}

BOOST_AUTO_TEST_CASE(timeouts_and_failures_to_start) {
    CommandResult hung;
    hung.ending = CommandResult::Ending::TimedOut;
    auto o = judge_probe(hung, orted, std::chrono::seconds(5));
    BOOST_TEST(to_string(*o.problem) == "timeout");
    BOOST_TEST(o.evidence.find("no answer within 5 s") != std::string::npos);
    CommandResult late;
    late.ending = CommandResult::Ending::NotStarted;
    BOOST_TEST(to_string(*judge_probe(late, orted, std::chrono::seconds(5)).problem) == "timeout");
    CommandResult missing;
    missing.ending = CommandResult::Ending::SpawnFailed;
    missing.spawn_error = "cannot run 'sshx': No such file or directory";
    o = judge_probe(missing, orted, std::chrono::seconds(5));
    BOOST_TEST(to_string(*o.problem) == "other");
    BOOST_TEST(o.evidence == missing.spawn_error);
}

BOOST_AUTO_TEST_CASE(probe_command_is_one_argument_per_thing) {
    SshAgent agent{{"ssh", "-F", "/etc/c/ssh_config"}, "test", true};
    const auto argv = remote_argv(agent, std::chrono::seconds(7), "node1", std::string("alice"), "true");
    const std::vector<std::string> expected{"ssh",
                                            "-F",
                                            "/etc/c/ssh_config",
                                            "-o",
                                            "BatchMode=yes",
                                            "-o",
                                            "ConnectTimeout=7",
                                            "-o",
                                            "NumberOfPasswordPrompts=0",
                                            "-l",
                                            "alice",
                                            "node1",
                                            "true"};
    BOOST_TEST(argv == expected);
    BOOST_TEST(std::none_of(argv.begin(), argv.end(),
                            [](const std::string& a) { return a.find("StrictHostKeyChecking") != std::string::npos; }));
    SshAgent rsh{{"rsh"}, "test", false};
    BOOST_TEST((remote_argv(rsh, std::chrono::seconds(7), "n", std::nullopt, "true") ==
                std::vector<std::string>{"rsh", "n", "true"}));
    // The script is wrapped for any login shell and holds no single quote inside.
    const auto& cmd = probe_remote_command();
    BOOST_TEST(cmd.starts_with("sh -c '"));
    BOOST_TEST(std::count(cmd.begin(), cmd.end(), '\'') == 2);
    BOOST_TEST(cmd.find('!') == std::string::npos);
    BOOST_TEST(std::count(mesh_remote_command().begin(), mesh_remote_command().end(), '\'') == 2);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(mpi_versions) {
    auto m = parse_mpi_version("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n");
    BOOST_TEST(to_string(m.flavour) == "openmpi");
    BOOST_TEST(m.version == "4.1.4");
    BOOST_TEST((launcher_daemons(m) == std::vector<std::string>{"orted"}));
    m = parse_mpi_version("mpirun (Open MPI) 5.0.3\n");
    BOOST_TEST((launcher_daemons(m) == std::vector<std::string>{"prted"}));
    m = parse_mpi_version(
        "HYDRA build details:\n    Version:                                 4.0.2\n    Release Date: ...\n");
    BOOST_TEST(to_string(m.flavour) == "mpich");
    BOOST_TEST(m.version == "4.0.2");
    BOOST_TEST((launcher_daemons(m) == std::vector<std::string>{"hydra_pmi_proxy"}));
    m = parse_mpi_version("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: 1d8c1e0)\n");
    BOOST_TEST(to_string(m.flavour) == "intelmpi");
    BOOST_TEST(m.version == "2021.10");
    m = parse_mpi_version("something else 1.0\n");
    BOOST_TEST(to_string(m.flavour) == "unknown");
    BOOST_TEST(launcher_daemons(m).size() == 3u);
    BOOST_TEST(to_string(parse_mpi_version("").flavour) == "none");
}

BOOST_AUTO_TEST_CASE(ssh_agents_split_like_the_launchers) {
    BOOST_TEST((split_command("  ssh  -F /x/cfg -x ") == std::vector<std::string>{"ssh", "-F", "/x/cfg", "-x"}));
    MpiInstall none;
    const auto agent = resolve_ssh_agent(std::string("sh -c true"), none);
    BOOST_TEST(agent.source == "--ssh-command");
    BOOST_TEST(!agent.is_ssh);
    BOOST_CHECK_THROW((void)resolve_ssh_agent(std::string("no-such-ssh-program -x"), none), UsageError);
}

BOOST_AUTO_TEST_SUITE(mesh)

BOOST_AUTO_TEST_CASE(pairs_all_or_sampled) {
    const std::vector<std::size_t> nodes{0, 1, 2, 3, 4};
    BOOST_TEST(mesh_pairs(nodes, std::nullopt).size() == 20u);
    const auto sampled = mesh_pairs(nodes, 2);
    BOOST_TEST(sampled.size() == 10u);
    for (std::size_t n : nodes) {  // every node is a source twice and a target twice
        BOOST_TEST(std::count_if(sampled.begin(), sampled.end(), [n](auto p) { return p.first == n; }) == 2);
        BOOST_TEST(std::count_if(sampled.begin(), sampled.end(), [n](auto p) { return p.second == n; }) == 2);
    }
    BOOST_TEST(mesh_pairs(nodes, 99).size() == 20u);
    BOOST_TEST(mesh_pairs({7}, std::nullopt).empty());
}

BOOST_AUTO_TEST_CASE(reads_the_loop_output) {
    std::vector<HostTarget> targets(3);
    targets[0].host = "a";
    targets[1].host = "b";
    targets[2].host = "c";
    std::vector<MeshPair> pairs{{0, 1, false, Problem::Other, {}, {}}, {0, 2, false, Problem::Other, {}, {}}};
    const std::string out = std::string(mesh_line) + "\tb\t0\t" + std::string(mesh_ok) + "\n" + std::string(mesh_line) +
                            "\tc\t255\troot@c: Permission denied (publickey).\n";
    read_mesh_output(out, 0, targets, pairs);
    BOOST_TEST(pairs[0].ok);
    BOOST_TEST(!pairs[1].ok);
    BOOST_TEST(to_string(*pairs[1].problem) == "auth_denied");
    BOOST_TEST(pairs[1].evidence == "root@c: Permission denied (publickey).");
    BOOST_TEST(pairs[1].remedy.starts_with("from a: "));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(mpirun)

BOOST_AUTO_TEST_CASE(commands_per_launcher) {
    MpiInstall ompi = parse_mpi_version("mpirun (Open MPI) 4.1.4");
    ompi.launcher_path = "/usr/bin/mpirun";
    const auto argv = mpirun_argv(Launcher::OpenMpi, ompi, "/tmp/h", 3, {"a", "b", "c"}, std::string("ssh -F /c"));
    BOOST_TEST(argv.front() == "mpirun");  // by name, as typed: an absolute path would act as --prefix
    BOOST_TEST((std::find(argv.begin(), argv.end(), "ppr:1:node") != argv.end()));
    BOOST_TEST((std::find(argv.begin(), argv.end(), "ssh -F /c") != argv.end()));
    BOOST_TEST(argv.back() == "hostname");
    MpiInstall mpich = parse_mpi_version("HYDRA build details:\n    Version: 4.0.2\n");
    const auto hydra = mpirun_argv(Launcher::Hydra, mpich, "/tmp/h", 2, {"a", "b"}, std::nullopt);
    BOOST_TEST((hydra == std::vector<std::string>{"mpiexec", "-f", "/tmp/h", "-n", "2", "-ppn", "1", "hostname"}));
    const auto srun = mpirun_argv(Launcher::Srun, mpich, "/tmp/h", 2, {"a", "b"}, std::nullopt);
    // Explicit node and task counts: inside an allocation srun would otherwise take SLURM_NTASKS for the tasks. The
    // Slurm node name is printed, the name -w gave.
    BOOST_TEST((srun == std::vector<std::string>{"srun", "-N", "2", "--ntasks=2", "--ntasks-per-node=1", "-w", "a,b",
                                                 "printenv", "SLURMD_NODENAME"}));
    std::vector<HostTarget> hosts(2);
    hosts[0].host = "a";
    hosts[1].host = "b";
    hosts[1].user = "u";
    BOOST_TEST(launcher_hostfile(Launcher::OpenMpi, hosts) == "a slots=1\nu@b slots=1\n");
    BOOST_TEST(launcher_hostfile(Launcher::Hydra, hosts) == "a:1\nb:1 user=u\n");
}

BOOST_AUTO_TEST_CASE(names_printed_against_names_expected) {
    MpirunResult ok;
    ok.expected = {"node1", "node2"};
    judge_mpirun(ok, exited(0, "node2.cluster\nnode1\n", ""), {"h1", "h2"});
    BOOST_TEST(ok.status == "ok");
    BOOST_TEST(ok.missing.empty());

    MpirunResult partial;
    partial.expected = {"node1", "node2"};
    judge_mpirun(partial, exited(1, "node1\n", "ORTE was unable to reliably start one or more daemons.\n"),
                 {"h1", "h2"});
    BOOST_TEST(partial.status == "failed");
    BOOST_TEST((partial.missing == std::vector<std::string>{"h2"}));
    BOOST_TEST(partial.evidence.find("unable to reliably start") != std::string::npos);

    MpirunResult hang;
    hang.expected = {"node1", "node2"};
    CommandResult timed_out;
    timed_out.ending = CommandResult::Ending::TimedOut;
    timed_out.out = "node1\n";
    judge_mpirun(hang, timed_out, {"h1", "h2"});
    BOOST_TEST(hang.status == "hang");
    BOOST_TEST((hang.missing == std::vector<std::string>{"h2"}));
    BOOST_TEST(hang.remedy.find("h2") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(ssh_config_dump) {
    const auto cfg = parse_ssh_config_dump(
        "user alice\nhostname 10.0.0.5\nport 2222\nidentityfile /k/id_ed25519\nidentityfile /k/id_rsa\n"
        "globalknownhostsfile /etc/ssh/ssh_known_hosts /dev/null\nuserknownhostsfile /k/known_hosts\n"
        "stricthostkeychecking true\n");
    BOOST_TEST(cfg.user == "alice");
    BOOST_TEST(cfg.port == 2222);
    BOOST_TEST(cfg.identity_files.size() == 2u);
    BOOST_TEST((cfg.known_hosts_files == std::vector<std::string>{"/k/known_hosts", "/etc/ssh/ssh_known_hosts"}));
    BOOST_TEST(known_hosts_entry("n1", 22) == "n1");
    BOOST_TEST(known_hosts_entry("n1", 2222) == "[n1]:2222");
}

BOOST_AUTO_TEST_SUITE(resolution)

BOOST_AUTO_TEST_CASE(names_that_resolve_and_names_that_do_not) {
    const auto r =
        resolve_names({"localhost", "127.0.1.5", "nosuchhost.invalid"}, 4, Clock::now() + std::chrono::seconds(20));
    BOOST_TEST(!r[0].error.has_value());
    BOOST_TEST((std::find(r[0].addresses.begin(), r[0].addresses.end(), "127.0.0.1") != r[0].addresses.end()));
    BOOST_TEST((r[1].addresses == std::vector<std::string>{"127.0.1.5"}));
    BOOST_TEST(r[2].error.has_value());
    BOOST_TEST(r[2].addresses.empty());
}

BOOST_AUTO_TEST_CASE(same_machine_groups_by_address_and_by_this_machine) {
    std::vector<Resolution> r(5);
    r[0].addresses = {"10.0.0.1"};
    r[1].addresses = {"10.0.0.2", "10.0.0.1"};  // a second name of the first machine
    r[2].addresses = {"10.0.0.3"};
    r[3].addresses = {"127.0.0.1"};
    r[4].addresses = {"192.168.7.7"};  // an address of this machine's own interface
    const auto groups =
        same_machine_groups({"a", "a-ib", "c", "localhost", "me"}, r, {"127.0.0.1", "::1", "192.168.7.7"});
    BOOST_TEST_REQUIRE(groups.size() == 2u);
    BOOST_TEST((groups[0] == std::vector<std::size_t>{0, 1}));
    BOOST_TEST((groups[1] == std::vector<std::size_t>{3, 4}));
    // The same name twice is slot counting, not a mistake.
    std::vector<Resolution> twice(2);
    twice[0].addresses = twice[1].addresses = {"10.0.0.1"};
    BOOST_TEST(same_machine_groups({"a", "a"}, twice, {}).empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(local_checks_explain_keys_and_known_hosts) {
    // A client set-up as ssh -G sees it: a passphrase-protected key with no agent, a key others can read, and a
    // known_hosts file with an entry under the address only.
    const auto dir = std::filesystem::temp_directory_path() / ("lockstep-local-checks-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string protected_key = (dir / "protected").string();
    const std::string loose_key = (dir / "loose").string();
    const std::string known_hosts = (dir / "known_hosts").string();
    for (const auto& [key, passphrase] : {std::pair{protected_key, "secret"}, std::pair{loose_key, ""}}) {
        Command keygen;
        keygen.argv = {"ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "test", "-f", key};
        BOOST_TEST_REQUIRE(run_command(keygen).exit_code == 0);
    }
    ::chmod(loose_key.c_str(), 0644);
    std::ifstream pub(loose_key + ".pub");
    std::string type, blob;
    pub >> type >> blob;
    std::ofstream(known_hosts) << "[10.0.0.9]:2222 " << type << " " << blob << "\n";
    std::ofstream(dir / "ssh_config") << "Host h1\n  HostName 10.0.0.9\n  Port 2222\n  User alice\n"
                                      << "  IdentityFile " << protected_key << "\n  IdentityFile " << loose_key
                                      << "\n  IdentitiesOnly yes\n  UserKnownHostsFile " << known_hosts
                                      << "\n  GlobalKnownHostsFile /dev/null\n";
    ::unsetenv("SSH_AUTH_SOCK");
    LocalChecker checker(SshAgent{{"ssh", "-F", (dir / "ssh_config").string()}, "test", true},
                         Clock::now() + std::chrono::seconds(30));

    const auto auth = checker.explain(Problem::AuthDenied, "h1", std::nullopt, {"10.0.0.9"}, "Permission denied");
    const std::string details = fmt::format("{}", fmt::join(auth.details, "\n"));
    BOOST_TEST(details.find(protected_key + " is protected by a passphrase and no ssh-agent") != std::string::npos,
               details);
    BOOST_TEST(details.find(loose_key + " has mode 0644") != std::string::npos, details);
    BOOST_TEST((auth.refined == Problem::KeyPermissions));
    BOOST_TEST(auth.context.port == 2222);
    BOOST_TEST(auth.context.user == "alice");
    BOOST_TEST(auth.context.key_file == loose_key);
    BOOST_TEST(auth.context.known_hosts == known_hosts);

    const auto key = checker.explain(Problem::HostKeyUnknown, "h1", std::nullopt, {"10.0.0.10"}, "");
    BOOST_TEST((key.details == std::vector<std::string>{"an entry for '[10.0.0.9]:2222' in " + known_hosts,
                                                        "no entry for '[10.0.0.10]:2222' in " + known_hosts}));
    std::filesystem::remove_all(dir);
}
