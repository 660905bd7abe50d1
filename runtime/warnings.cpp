// Where the runtime layer's warnings go: the sink a layer above installed, else stderr.

#include <lockstep/internal/warnings.hpp>

#include <atomic>
#include <cstdio>

namespace lockstep::detail {

namespace {
// Constant-initialised: a sink installed from another library's static initialiser is never overwritten by this one.
constinit std::atomic<WarningSink> installed_sink{nullptr};
}  // namespace

void set_warning_sink(WarningSink sink) noexcept {
    installed_sink.store(sink, std::memory_order_release);
}

void warn(std::string_view channel, std::string_view text) {
    if (WarningSink sink = installed_sink.load(std::memory_order_acquire)) {
        sink(channel, text);
        return;
    }
    std::fprintf(stderr, "[%.*s] WARNING: %.*s\n", static_cast<int>(channel.size()), channel.data(),
                 static_cast<int>(text.size()), text.data());
}

}  // namespace lockstep::detail
