#include "call_site.hpp"

#include <link.h>
#include <unwind.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

namespace lockstep::check::fortran {
namespace {

// Libraries whose code stands between the program and an entry point: Open MPI's mpi_f08 module procedures, and
// MPICH's Fortran bindings, whose procedures call the C functions themselves (through one or two frames).
constexpr std::array kBindingLibraries{"libmpi_usempif08.so", "libmpichfort.so"};
// A bound on the binding library's frames in a row (MPICH's mpi_f08 has two), against a corrupt stack.
constexpr int kMaxBindingFrames = 4;

struct AddressRange {
    std::uintptr_t begin;
    std::uintptr_t end;
};

// The executable segments of the binding libraries, read once (they are linked to a program that uses them, so they
// are loaded before its first MPI call). Never destroyed: MPI calls may come while the process exits.
const std::vector<AddressRange>& binding_code() {
    static const auto* ranges = [] {
        auto* found = new std::vector<AddressRange>;
        dl_iterate_phdr(
            [](dl_phdr_info* info, std::size_t, void* out) {
                const char* name = info->dlpi_name;
                if (name == nullptr) return 0;
                bool binding = false;
                for (const char* library : kBindingLibraries)
                    binding = binding || std::strstr(name, library) != nullptr;
                if (!binding) return 0;
                for (int i = 0; i < info->dlpi_phnum; ++i) {
                    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
                    if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0) continue;
                    const std::uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
                    static_cast<std::vector<AddressRange>*>(out)->push_back({begin, begin + segment.p_memsz});
                }
                return 0;
            },
            found);
        return found;
    }();
    return *ranges;
}

bool in_binding_code(std::uintptr_t address) noexcept {
    for (const AddressRange& range : binding_code())
        if (address >= range.begin && address < range.end) return true;
    return false;
}

// The unwinder's walk. Each context gives a frame's return address (into its caller) and the frame's own canonical
// frame address: the context whose return address is `return_address` is the entry point's, the next ones are the
// binding library's, and the first return address out of that library is the program's call site.
struct Walk {
    std::uintptr_t return_address;
    bool entry_seen = false;
    int binding_frames = 0;
    std::uintptr_t binding_frame = 0;  // the canonical frame address of the binding library's outermost frame
    std::uintptr_t call_site = 0;
};

_Unwind_Reason_Code step(_Unwind_Context* context, void* argument) {
    auto* walk = static_cast<Walk*>(argument);
    const std::uintptr_t ip = _Unwind_GetIP(context);
    if (!walk->entry_seen) {
        walk->entry_seen = ip == walk->return_address;
        return _URC_NO_REASON;
    }
    if (++walk->binding_frames > kMaxBindingFrames) return _URC_END_OF_STACK;
    if (in_binding_code(ip)) return _URC_NO_REASON;
    walk->call_site = ip;
    walk->binding_frame = _Unwind_GetCFA(context);
    return _URC_END_OF_STACK;
}

#if defined(__x86_64__)
// The cache, one word per slot: the return address (user space fits in 47 bits) above the distance from the entry
// point's frame to the binding frame's. One word, so that a slot is never read half written.
constexpr int kDistanceBits = 16;
constexpr std::size_t kSlots = 128;
constexpr std::size_t kProbes = 4;
std::array<std::atomic<std::uint64_t>, kSlots> g_distances{};

std::size_t slot_of(std::uintptr_t return_address) noexcept {
    return static_cast<std::size_t>((return_address * 0x9E3779B97F4A7C15ull) >> 57) % kSlots;
}

bool cached_distance(std::uintptr_t return_address, std::uintptr_t& distance) noexcept {
    const std::size_t first = slot_of(return_address);
    for (std::size_t probe = 0; probe < kProbes; ++probe) {
        const std::uint64_t word = g_distances[(first + probe) % kSlots].load(std::memory_order_relaxed);
        if (word == 0) return false;
        if ((word >> kDistanceBits) == return_address) {
            distance = word & ((1u << kDistanceBits) - 1);
            return true;
        }
    }
    return false;
}

void cache_distance(std::uintptr_t return_address, std::uintptr_t distance) noexcept {
    if (distance >= (1u << kDistanceBits) || (return_address >> (64 - kDistanceBits)) != 0) return;
    const std::uint64_t word = (static_cast<std::uint64_t>(return_address) << kDistanceBits) | distance;
    const std::size_t first = slot_of(return_address);
    for (std::size_t probe = 0; probe < kProbes; ++probe) {
        std::uint64_t expected = 0;
        auto& slot = g_distances[(first + probe) % kSlots];
        if (slot.compare_exchange_strong(expected, word, std::memory_order_relaxed)) return;
        if ((expected >> kDistanceBits) == return_address) return;  // another thread cached it
    }
}
#endif

}  // namespace

const void* program_call_site(const void* return_address, const void* frame) noexcept {
    const auto address = reinterpret_cast<std::uintptr_t>(return_address);
    if (!in_binding_code(address)) return return_address;
#if defined(__x86_64__)
    // The binding frame's return address lies just below its canonical frame address.
    const auto entry_frame = reinterpret_cast<std::uintptr_t>(frame);
    std::uintptr_t distance = 0;
    if (cached_distance(address, distance))
        return *reinterpret_cast<const void* const*>(entry_frame + distance - sizeof(void*));
#else
    (void)frame;
#endif
    Walk walk{address};
    _Unwind_Backtrace(step, &walk);
    if (walk.call_site == 0) return return_address;  // no unwind information: the binding library's own site
#if defined(__x86_64__)
    const std::uintptr_t slot = walk.binding_frame - sizeof(void*);
    if (walk.binding_frame > entry_frame && *reinterpret_cast<const std::uintptr_t*>(slot) == walk.call_site)
        cache_distance(address, walk.binding_frame - entry_frame);
#endif
    return reinterpret_cast<const void*>(walk.call_site);
}

std::size_t cached_return_addresses() noexcept {
    std::size_t cached = 0;
#if defined(__x86_64__)
    for (const auto& slot : g_distances) cached += slot.load(std::memory_order_relaxed) != 0 ? 1 : 0;
#endif
    return cached;
}

}  // namespace lockstep::check::fortran
