#pragma once
// Runs of a test that mostly wait (for a node's timeout, a hanging launch: tests/tools/test_hostcheck_cluster.cpp):
// started at the same time through run_fanout, each with its own time limit, so that they wait together instead of
// one after the other.

#include "mpi_launcher/child_process.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace lockstep::mpi_launcher {

// make(args) gives each run's Command, finish(args, result) what the test reads; results are in the order of `runs`.
template <typename Make, typename Finish>
auto run_together(const std::vector<std::vector<std::string>>& runs, Make make, Finish finish) {
    std::vector<Command> commands;
    for (const auto& args : runs) commands.push_back(make(args));
    const auto results = run_fanout(commands, FanoutOptions{});
    std::vector<decltype(finish(runs.front(), results.front()))> out;
    for (std::size_t i = 0; i < runs.size(); ++i) out.push_back(finish(runs[i], results.at(i)));
    return out;
}

}  // namespace lockstep::mpi_launcher
