// lockstep-rank-env --from openmpi|hydra|srun [--] PROGRAM [ARGS...]
// Sets torchrun's variables for this rank (rank_env.hpp) and executes PROGRAM in its place, found as a shell finds it.
// Exit status when PROGRAM cannot be executed: 127 not found, 126 found but not executable (as a shell's); 2 for a
// usage error or launcher variables that cannot be read.

#include "rank_env.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace re = lockstep::rank_env;

namespace {

constexpr const char* usage = "usage: lockstep-rank-env --from openmpi|hydra|srun [--] PROGRAM [ARGS...]\n";

re::Environment current_environment() {
    re::Environment env;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string text(*entry);
        const std::size_t eq = text.find('=');
        if (eq != std::string::npos) env.emplace(text.substr(0, eq), text.substr(eq + 1));
    }
    return env;
}

}  // namespace

int main(int argc, char** argv) {
    std::optional<re::Source> source;
    int first = 1;
    while (first < argc) {
        const std::string arg = argv[first];
        if (arg == "--") {
            ++first;
            break;
        }
        if (arg == "--from" && first + 1 < argc) {
            source = re::parse_source(argv[first + 1]);
            if (!source) {
                std::fprintf(stderr, "lockstep-rank-env: --from %s: give openmpi, hydra or srun\n", argv[first + 1]);
                return 2;
            }
            first += 2;
        } else if (arg == "-h" || arg == "--help") {
            std::fputs(usage, stdout);
            return 0;
        } else if (arg.starts_with("-")) {
            std::fprintf(stderr, "lockstep-rank-env: unknown option '%s'\n%s", arg.c_str(), usage);
            return 2;
        } else {
            break;
        }
    }
    if (!source || first >= argc) {
        std::fputs(usage, stderr);
        return 2;
    }
    try {
        for (const auto& [name, value] : re::torch_variables(*source, current_environment())) {
            if (::setenv(name.c_str(), value.c_str(), 1) != 0) {
                std::fprintf(stderr, "lockstep-rank-env: cannot set %s: %s\n", name.c_str(), std::strerror(errno));
                return 2;
            }
        }
    } catch (const re::RankEnvError& e) {
        std::fprintf(stderr, "lockstep-rank-env: %s\n", e.message.c_str());
        return 2;
    }
    ::execvp(argv[first], argv + first);
    const int error = errno;
    std::fprintf(stderr, "lockstep-rank-env: cannot execute '%s': %s\n", argv[first], std::strerror(error));
    return error == ENOENT || error == ENOTDIR ? 127 : 126;
}
