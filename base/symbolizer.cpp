// Return addresses to source locations (lockstep/base/symbolizer.hpp).

#include <lockstep/base/symbolizer.hpp>

#include <dlfcn.h>
#include <fmt/format.h>
#include <boost/stacktrace/frame.hpp>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace lockstep::base {
namespace {

SourceLocation resolve(const void* return_address) {
    SourceLocation where;
    // The call instruction ends just before the return address; its last byte lies in the call's line.
    const auto* address = static_cast<const char*>(return_address) - 1;
    Dl_info info{};
    if (::dladdr(address, &info) != 0) {
        if (info.dli_fname != nullptr) where.module = info.dli_fname;
        where.offset = static_cast<std::size_t>(address - static_cast<const char*>(info.dli_fbase));
    }
    const boost::stacktrace::frame frame(address);
    where.function = frame.name();
    where.file = frame.source_file();
    where.line = static_cast<unsigned>(frame.source_line());
    return where;
}

}  // namespace

const SourceLocation& symbolize_return_address(const void* return_address) {
    // Never destroyed: reports may be built while the process exits.
    static auto* mutex = new std::mutex;
    static auto* cache = new std::unordered_map<const void*, std::unique_ptr<SourceLocation>>;
    {
        std::scoped_lock lock(*mutex);
        const auto it = cache->find(return_address);
        if (it != cache->end()) return *it->second;
    }
    auto resolved = std::make_unique<SourceLocation>(resolve(return_address));
    std::scoped_lock lock(*mutex);
    auto& slot = (*cache)[return_address];
    if (!slot) slot = std::move(resolved);
    return *slot;
}

std::string describe_call_site(const void* return_address) {
    if (return_address == nullptr) return "an unknown call site";
    const SourceLocation& where = symbolize_return_address(return_address);
    const std::string function = where.function.empty() ? "??" : where.function;
    if (!where.file.empty() && where.line != 0) return fmt::format("{} ({}:{})", function, where.file, where.line);
    std::string module = where.module;
    if (const auto slash = module.rfind('/'); slash != std::string::npos) module = module.substr(slash + 1);
    return fmt::format("{} ({}+{:#x})", function, module.empty() ? "??" : module, where.offset);
}

}  // namespace lockstep::base
