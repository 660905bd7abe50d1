// A job for the launcher tests: each rank prints one JSON line with its identity, the resolved settings and their
// sources, then exits with the status asked for (--exit N) or dies of a signal (--signal N). With --allreduce it is an
// MPI program: it starts the runtime, sums the ranks with one allreduce over the world, and adds the sum, the size MPI
// gives and the node it ran on (Slurm's SLURMD_NODENAME, else the host name) to its line.

#include <lockstep.hpp>

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    int exit_code = 0;
    int signal_number = 0;
    bool allreduce = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--allreduce") == 0) allreduce = true;
        if (i + 1 >= argc) continue;
        if (std::strcmp(argv[i], "--exit") == 0) exit_code = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--signal") == 0) signal_number = std::atoi(argv[i + 1]);
    }
    const lockstep::ProcessIdentity id = lockstep::identity_from_environment();
    const lockstep::Config& config = lockstep::config();
    nlohmann::json line = {
        {"rank", id.rank},           {"size", id.size},
        {"debug", config.debug},     {"log_level", std::string(lockstep::log_level_name(config.log_level))},
        {"timeout", config.timeout}, {"seed", config.seed},
        {"sources", config.sources}, {"args", std::vector<std::string>(argv + 1, argv + argc)}};
    if (allreduce) {
        lockstep::ScopedRuntime runtime;
        auto& world = lockstep::Communicator::world();
        lockstep::Tensor value = lockstep::Tensor::from_data<double>({static_cast<double>(world.rank())}, {1});
        world.allreduce_(value, lockstep::ReduceOp::Sum);
        const char* node = std::getenv("SLURMD_NODENAME");
        line["mpi_rank"] = world.rank();
        line["mpi_size"] = world.size();
        line["allreduce_sum"] = value.to_vector<double>().front();
        line["node"] = node != nullptr ? std::string(node) : lockstep::host_name();
    }
    // One write per rank, so that lines of different ranks never interleave.
    const std::string text = line.dump() + "\n";
    if (::write(STDOUT_FILENO, text.data(), text.size()) < 0) return 1;
    if (signal_number != 0) std::raise(signal_number);
    return exit_code;
}
