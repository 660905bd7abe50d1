#pragma once
// Warnings of the runtime layer (the host allocator's "arena segment full", say) go to a sink that a layer above
// installs: logging, once it is loaded, routes them to the logger `channel` as a record of every rank. The runtime
// cannot include logging (layers only point down), and a program that links the runtime alone still sees them, on
// stderr.

#include <string_view>

namespace lockstep::detail {

using WarningSink = void (*)(std::string_view channel, std::string_view text);

// Installs the sink (nullptr: back to stderr). Safe from a static initialiser and from any thread.
void set_warning_sink(WarningSink sink) noexcept;

// Hands one warning of this process to the sink.
void warn(std::string_view channel, std::string_view text);

}  // namespace lockstep::detail
