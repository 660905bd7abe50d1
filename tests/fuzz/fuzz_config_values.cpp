// Fuzz target: the value parsers of the runtime's settings, through their public entry points: sizes
// (lockstep::parse_bytes), booleans, log levels, and every LOCKSTEP_* variable as Config::resolve reads it (timeouts
// with units, memory caps, seeds, chunk sizes, addresses). A value is whatever a user typed or a launcher forwarded:
// each must parse or be refused with the documented error type, never crash or hang.

#include <lockstep/allocator.hpp>
#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        (void)lockstep::parse_bytes(text);
    } catch (const lockstep::InvalidArgumentError&) {
    }
    (void)lockstep::parse_bool(text);
    (void)lockstep::parse_log_level(text);

    lockstep::ConfigOverrides no_file;
    no_file.config_file = "";
    for (const auto& setting : lockstep::config_settings()) {
        if (setting.variable == nullptr) continue;
        try {
            const auto config =
                lockstep::Config::resolve(no_file, lockstep::map_environment({{setting.variable, text}}));
            (void)config.describe();
        } catch (const lockstep::ConfigError&) {
        }
    }
    return 0;
}
