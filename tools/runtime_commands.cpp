// The subcommands that need the lockstep runtime (and so libmpi): launch, config, env, test and trace. They are built
// into a module of their own, liblockstep_commands.so, that the `lockstep` program loads only when a command line needs
// them: `lockstep hostcheck`, the tool people run when MPI itself is broken, starts without libmpi or liblockstep.

#include "subcommand.hpp"

#include <vector>

extern "C" __attribute__((visibility("default"))) void lockstep_add_runtime_commands(
    CLI::App* app, std::vector<lockstep::tools::Subcommand>* subcommands) {
    namespace lt = lockstep::tools;
    subcommands->push_back(lt::add_launch_command(*app));
    subcommands->push_back(lt::add_config_command(*app));
    subcommands->push_back(lt::add_env_command(*app));
    subcommands->push_back(lt::add_test_command(*app));
    subcommands->push_back(lt::add_trace_command(*app));
}
