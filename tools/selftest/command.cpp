// `lockstep test`: the self-test, run under the launcher (lockstep launch -n 2 -- lockstep test).

#include "../subcommand.hpp"
#include "../terminal.hpp"
#include "selftest.hpp"

#include <lockstep/runtime.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace lockstep::tools {
namespace {

struct CommandLine {
    std::string colour = "auto";
};

int run(const CommandLine& cl) {
    try {
        ScopedRuntime runtime;
        bool all_passed = false;
        {
            Communicator comm(runtime->comm(), CommunicatorOptions{.debug = false, .timeout = std::nullopt});
            const selftest::DevicePlan plan = selftest::plan_devices(comm, runtime->device());
            const auto results = selftest::run_selftest(comm, plan.devices);
            all_passed = std::all_of(results.begin(), results.end(),
                                     [](const selftest::CheckResult& r) { return r.passed() || r.skipped; });
            // Failure details travel only to the rank that saw them; each rank prints its own, the main rank the table.
            for (const auto& r : results) {
                if (!r.detail.empty() && comm.rank() != 0) {
                    fmt::print(stderr, "lockstep test: rank {}: {} {}: {}\n", comm.rank(), r.name, r.dtype, r.detail);
                }
            }
            if (comm.rank() == 0) {
                std::cout << selftest::render_table(results, comm.size(), colour_wanted(cl.colour), plan.note);
                std::cout.flush();
            }
        }
        return all_passed ? 0 : 1;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "lockstep test: {}\n", e.what());
        return 2;
    } catch (const Error& e) {
        fmt::print(stderr, "lockstep test: {}\n", e.what());
        return 1;
    }
}

}  // namespace

Subcommand add_test_command(CLI::App& parent) {
    auto cl = std::make_shared<CommandLine>();
    CLI::App* app = parent.add_subcommand(
        "test",
        "Check this installation across the launched ranks: every collective on several dtypes against closed-form "
        "results, and debug mode catching a deliberate shape mismatch on every rank; on host tensors, and again on "
        "CUDA tensors where every rank has a CUDA device. Prints a pass/fail table with the device of each row.");
    app->footer(
        "Run it under the launcher: lockstep launch -n 2 -- lockstep test\n"
        "Exit status: 0 every check passed, 1 a check failed or the job could not run, 2 usage or config error.");
    app->add_option("--color", cl->colour, "Colour the table: auto (only on a terminal), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    return Subcommand{app, [cl] { return run(*cl); }};
}

}  // namespace lockstep::tools
