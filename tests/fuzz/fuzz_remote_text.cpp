// Fuzz target: every parser of text that comes from another machine or from ssh: the probe's output (with the
// `mpirun --version` lines in it), MPI version text, ssh's error text and its `ssh -G` dump, the mesh loop's lines,
// the names `mpirun hostname` printed, ssh-keygen's output; and the escaping that shows such text on a terminal.
// Whatever a node prints, each must finish in time linear in the text, without exceptions.

#include "local_checks.hpp"
#include "mesh.hpp"
#include "mpi_launcher/display_text.hpp"
#include "mpi_launcher/flavour.hpp"
#include "mpirun_check.hpp"
#include "probe.hpp"
#include "problem.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

using namespace lockstep::hostcheck;
namespace ml = lockstep::mpi_launcher;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);

    // The probe: its output as it arrives, and the same text behind the begin sentinel.
    (void)parse_probe_output(text);
    const std::string probed = std::string(probe_begin) + "\n" + text;
    if (const auto facts = parse_probe_output(probed)) {
        (void)facts->mpi.describe();
        (void)facts->mpi.major_version();
        (void)facts->mpi.runs_on_prrte();
    }
    ml::CommandResult result;
    result.ending =
        size > 0 && data[0] % 2 == 0 ? ml::CommandResult::Ending::Exited : ml::CommandResult::Ending::TimedOut;
    result.exit_code = 255;
    result.out = probed;
    result.err = text;
    (void)judge_probe(result, {"orted", "prted"}, std::chrono::seconds(10));
    result.out = text;
    (void)judge_probe(result, {"hydra_pmi_proxy"}, std::chrono::seconds(10));

    const auto mpi = ml::parse_mpi_version(text);
    (void)mpi.describe();
    (void)mpi.major_version();

    // ssh's own words.
    const auto c = classify_ssh_error(text);
    RemedyContext context;
    context.host = "node1";
    context.port = ssh_port_in(text);
    context.key_file = key_file_too_open(text);
    (void)remedy_for(c.problem, context);
    (void)clip_evidence(text);
    (void)clip_evidence(text, 16);
    (void)sha256_fingerprint(text);
    (void)parse_ssh_config_dump(text);

    // The mesh loop's report, from node 0 about nodes 1 and 2.
    const std::vector<HostTarget> targets{
        {"n0", {}, {1}, 1, false}, {"n1", {}, {2}, 1, false}, {"n2", {}, {3}, 1, false}};
    std::vector<MeshPair> pairs{{0, 1, false, Problem::Other, {}, {}}, {0, 2, false, Problem::Other, {}, {}}};
    read_mesh_output(text, 0, targets, pairs);
    read_mesh_output(std::string(mesh_line) + "\tn1\t" + text, 0, targets, pairs);

    // What `mpirun ... hostname` printed.
    MpirunResult mpirun;
    mpirun.expected = {"n0", "n1"};
    ml::CommandResult run;
    run.ending = ml::CommandResult::Ending::Exited;
    run.out = text;
    run.err = text;
    judge_mpirun(mpirun, run, {"n0", "n1"});

    // How any of it is shown on a terminal.
    const std::string shown = ml::escape_control(text, true);
    for (const char ch : ml::escape_control(text)) {
        const auto b = static_cast<unsigned char>(ch);
        if (b < 0x20 && ch != '\t') __builtin_trap();  // a control character got through
        if (b == 0x7f) __builtin_trap();
    }
    (void)ml::shown_value(text);
    (void)shown;
    return 0;
}
