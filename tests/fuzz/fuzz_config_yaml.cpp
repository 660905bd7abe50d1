// Fuzz target: the config.yaml loader (lockstep::Config::load_file). The file is the user's, or anything
// LOCKSTEP_CONFIG_FILE names; every input must load or end in a ConfigError naming file:line:column, in time. The
// loader reads from a path, so each input is written to one temporary file first.

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

// One file for the whole run, removed at exit; in /dev/shm where there is one, as inputs come by the thousand.
const std::string& input_file() {
    static const std::string path = [] {
        const std::filesystem::path dir =
            std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
        std::string pattern = (dir / "lockstep-fuzz-config-XXXXXX").string();
        const int fd = ::mkstemp(pattern.data());
        if (fd < 0) std::abort();
        ::close(fd);
        return pattern;
    }();
    static const struct Remover {
        ~Remover() { std::remove(path.c_str()); }
    } remover;
    return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string& path = input_file();
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    lockstep::Config config;
    try {
        lockstep::Config::load_file(path, config);
        (void)config.describe();
    } catch (const lockstep::ConfigError&) {
    }
    return 0;
}
