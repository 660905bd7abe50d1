// The node's shared-memory arena: one POSIX shared-memory object per node, mapped by every process of the node.
//
// Why POSIX shared memory, and not an MPI-3 shared window or a memfd: a window's memory is MPI's (it must be freed
// before MPI_Finalize, while tensors may outlive the runtime), and Open MPI backs it with a file in its session
// directory, which may be on disk; a memfd has no name the other processes can open without passing the descriptor
// over a socket or reaching into /proc/PID/fd, which hardened systems forbid. A POSIX object lives in /dev/shm, whose
// size is the limit users know and set (docker --shm-size), and its name is unlinked as soon as every process of the
// node has mapped it: from then on it has no name, and its pages go back to the system when the last process that
// maps it exits, however the job ends. Only the instants between shm_open and shm_unlink (one barrier) leave a name
// behind if the node's leader dies there.
//
// Each process owns one segment and allocates from it only (first fit over a free list, in 512-byte granules). A
// block's pages are reserved in the object with fallocate when the block is handed out, so that a full /dev/shm is a
// fallback to private memory then, never a SIGBUS later when a page is first touched; freed blocks give their pages
// back (FALLOC_FL_PUNCH_HOLE), as munmap does for private blocks.

#include <lockstep/allocator.hpp>
#include <lockstep/internal/arena.hpp>
#include <lockstep/shared_memory.hpp>

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>

namespace lockstep {

std::string_view shm_mode_name(ShmMode mode) noexcept {
    switch (mode) {
        case ShmMode::Auto:
            return "auto";
        case ShmMode::On:
            return "on";
        case ShmMode::Off:
            return "off";
    }
    return "auto";
}

std::string_view thread_level_name(ThreadLevel level) noexcept {
    switch (level) {
        case ThreadLevel::Single:
            return "single";
        case ThreadLevel::Funneled:
            return "funneled";
        case ThreadLevel::Serialized:
            return "serialized";
        case ThreadLevel::Multiple:
            return "multiple";
    }
    return "multiple";
}

namespace detail {

namespace {

constexpr std::size_t page_bytes = 4096;
// Blocks are cut at the allocator's own granule, so that a small block costs no more here than in private memory;
// only the pages wholly inside a freed block are given back (a partial page may be shared with a neighbour).
constexpr std::size_t block_granule = 512;
constexpr std::size_t segment_granule = std::size_t{2} << 20;
// An automatic segment takes half of /dev/shm's free space shared among the node's processes, at most this much:
// address space only until blocks are allocated, but a larger default would only hide a leak.
constexpr std::size_t largest_auto_segment = std::size_t{16} << 30;
// Below this an automatic segment is not worth having: the tensors that gain from it would not fit.
constexpr std::size_t smallest_auto_segment = std::size_t{64} << 20;

struct ArenaState {
    std::atomic<bool> active{false};
    bool set_up = false;
    ShmMode mode = ShmMode::Auto;
    std::size_t threshold = 0;
    std::size_t small_max = 0;
    std::byte* base = nullptr;  // the whole object, in this process
    std::size_t total = 0;
    std::size_t segment = 0;
    std::byte* own = nullptr;  // this process's segment
    int local_index = 0;
    int local_size = 1;
    int fd = -1;
    std::uint64_t id = 0;
    std::string backing;
    std::string reason;
    bool reason_is_warning = false;

    std::mutex mutex;
    std::map<std::size_t, std::size_t> free_blocks;  // offset in the segment -> bytes
    std::size_t used = 0;
    std::atomic<std::uint64_t> fallbacks{0};
    std::atomic<bool> warned_full{false};
};

// Never destroyed: blocks may be freed by static destructors after main returns.
ArenaState& state() {
    static auto* s = new ArenaState;
    return *s;
}

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

std::size_t dev_shm_free() {
    struct statvfs fs {};
    if (::statvfs("/dev/shm", &fs) != 0) return 0;
    return static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize;
}

std::string size_source(const Config& config) {
    const auto it = config.sources.find("shm_arena_size");
    return it == config.sources.end() ? std::string("default") : it->second;
}

// What the leader tells the node: the object to open, or why there is none.
struct Verdict {
    std::int32_t ok = 0;
    std::int32_t warning = 0;
    std::uint64_t id = 0;
    std::uint64_t segment = 0;
    std::array<char, 64> name{};
    std::array<char, 512> reason{};
};

void copy_text(std::span<char> into, std::string_view text) {
    const std::size_t n = std::min(text.size(), into.size() - 1);
    std::memcpy(into.data(), text.data(), n);
    into[n] = '\0';
}

}  // namespace

void setup_arena(MPI_Comm local_comm, const Config& config) {
    ArenaState& a = state();
    if (a.set_up) return;
    a.set_up = true;
    a.mode = config.shm;
    a.threshold = config.shm_threshold;
    a.small_max = config.shm_small_max;
    LOCKSTEP_MPI_CHECK(MPI_Comm_rank(local_comm, &a.local_index));
    LOCKSTEP_MPI_CHECK(MPI_Comm_size(local_comm, &a.local_size));

    // Every process says what segment it wants (0: none); the node takes the smallest, or none if any says none.
    std::uint64_t want = 0;
    std::string mine_why;
    const std::size_t free_now = dev_shm_free();
    if (config.shm == ShmMode::Off) {
        const auto it = config.sources.find("shm");
        mine_why = fmt::format("shm is off ({})", it == config.sources.end() ? "default" : it->second);
    } else if (config.shm == ShmMode::Auto && a.local_size < 2) {
        mine_why = "shm is auto and this process is alone on its node (set shm: on to use the arena anyway)";
    } else if (config.shm_arena_size) {
        want = round_up(std::max<std::size_t>(*config.shm_arena_size, 1), segment_granule);
    } else {
        want = std::min(largest_auto_segment, free_now / 2 / static_cast<std::size_t>(a.local_size)) / segment_granule *
               segment_granule;
        if (want < smallest_auto_segment) want = smallest_auto_segment;  // the leader's room check decides
    }
    std::array<std::uint64_t, 2> wants{want, ~want};  // min of want, and max of want as ~min(~want)
    LOCKSTEP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, wants.data(), 2, MPI_UINT64_T, MPI_MIN, local_comm));
    if (wants[0] == 0) {
        a.reason = want == 0 ? mine_why
                             : "another process of this node does not use the arena (its shm setting is off, or it "
                               "is alone): every process of a node must agree";
        a.backing = "none";
        return;
    }
    const std::size_t segment = wants[0];

    Verdict verdict;
    std::string name;
    int fd = -1;
    if (a.local_index == 0) {
        const std::size_t total = segment * static_cast<std::size_t>(a.local_size);
        std::random_device entropy;
        verdict.id = (std::uint64_t{entropy()} << 32) ^ entropy() ^ static_cast<std::uint64_t>(::getpid());
        if (verdict.id == 0) verdict.id = 1;
        name = fmt::format("/lockstep-arena-{}-{:016x}", ::getpid(), verdict.id);
        verdict.segment = segment;
        if (free_now < total) {
            verdict.warning = 1;
            copy_text(verdict.reason,
                      fmt::format("/dev/shm has {} free, less than the shared-memory arena needs ({} for each of {} "
                                  "processes of this node; shm_arena_size from {}): host tensors stay in private "
                                  "memory and collectives use MPI. Enlarge /dev/shm (e.g. docker run --shm-size) or "
                                  "set a smaller shm_arena_size (LOCKSTEP_SHM_ARENA_SIZE), or shm: off to silence "
                                  "this.",
                                  format_bytes(free_now), format_bytes(segment), a.local_size, size_source(config)));
        } else {
            fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(total)) != 0) {
                const int err = errno;
                verdict.warning = 1;
                copy_text(verdict.reason,
                          fmt::format("the shared-memory arena could not be created in /dev/shm ({} of {}): {}; host "
                                      "tensors stay in private memory and collectives use MPI",
                                      fd < 0 ? "shm_open" : "ftruncate", format_bytes(total), std::strerror(err)));
                if (fd >= 0) {
                    ::close(fd);
                    ::shm_unlink(name.c_str());
                    fd = -1;
                }
            } else {
                verdict.ok = 1;
                copy_text(verdict.name, name);
            }
        }
    }
    LOCKSTEP_MPI_CHECK(MPI_Bcast(&verdict, sizeof verdict, MPI_BYTE, 0, local_comm));

    int mapped = 0;
    std::byte* base = nullptr;
    const std::size_t total = segment * static_cast<std::size_t>(a.local_size);
    std::string map_error;
    if (verdict.ok != 0) {
        if (a.local_index != 0) fd = ::shm_open(verdict.name.data(), O_RDWR, 0);
        if (fd >= 0) {
            void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) {
                base = static_cast<std::byte*>(p);
                mapped = 1;
            } else {
                map_error = fmt::format("mmap of {}: {}", format_bytes(total), std::strerror(errno));
            }
        } else {
            map_error = fmt::format("shm_open: {}", std::strerror(errno));
        }
    }
    int all_mapped = mapped;
    LOCKSTEP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_mapped, 1, MPI_INT, MPI_MIN, local_comm));
    // Every process has opened the object (or failed to): its name goes now.
    if (a.local_index == 0 && verdict.ok != 0) ::shm_unlink(name.c_str());

    if (verdict.ok == 0 || all_mapped == 0) {
        if (base != nullptr) ::munmap(base, total);
        if (fd >= 0) ::close(fd);
        a.backing = "none";
        a.reason_is_warning = true;
        a.reason = verdict.ok == 0 ? std::string(verdict.reason.data())
                                   : fmt::format(
                                         "a process of this node could not map the shared-memory arena{}; "
                                         "host tensors stay in private memory and collectives use MPI",
                                         map_error.empty() ? std::string() : " (here: " + map_error + ")");
        return;
    }
    a.base = base;
    a.total = total;
    a.segment = segment;
    a.own = base + segment * static_cast<std::size_t>(a.local_index);
    a.fd = fd;
    a.id = verdict.id;
    a.backing = "/dev/shm (POSIX shared memory, name unlinked once mapped)";
    a.free_blocks.emplace(0, segment);
    a.active.store(true, std::memory_order_release);
    // Blocks cached before the arena existed are private: drop them, so that new tensors come from the arena.
    allocator_for(Device::cpu()).empty_cache();
}

bool arena_active() noexcept {
    return state().active.load(std::memory_order_acquire);
}

std::size_t arena_threshold() noexcept {
    return state().threshold;
}

std::size_t arena_small_max() noexcept {
    return state().small_max;
}

void* arena_allocate(std::size_t bytes) noexcept {
    ArenaState& a = state();
    if (!arena_active()) return nullptr;
    const std::size_t len = round_up(std::max<std::size_t>(bytes, 1), block_granule);
    std::scoped_lock lock(a.mutex);
    for (auto it = a.free_blocks.begin(); it != a.free_blocks.end(); ++it) {
        if (it->second < len) continue;
        const std::size_t offset = it->first;
        const std::size_t rest = it->second - len;
        // Reserve the pages now: a full /dev/shm is ENOSPC here, not SIGBUS at first touch.
        const auto file_offset = static_cast<off_t>(static_cast<std::size_t>(a.own - a.base) + offset);
        if (::fallocate(a.fd, 0, file_offset, static_cast<off_t>(len)) != 0) return nullptr;
        a.free_blocks.erase(it);
        if (rest > 0) a.free_blocks.emplace(offset + len, rest);
        a.used += len;
        return a.own + offset;
    }
    return nullptr;
}

void arena_free(void* p, std::size_t bytes) noexcept {
    ArenaState& a = state();
    const std::size_t len = round_up(std::max<std::size_t>(bytes, 1), block_granule);
    const std::size_t offset = static_cast<std::size_t>(static_cast<std::byte*>(p) - a.own);
    std::scoped_lock lock(a.mutex);
    const std::size_t segment_start = static_cast<std::size_t>(a.own - a.base);
    const std::size_t first_page = round_up(segment_start + offset, page_bytes);
    const std::size_t end_page = (segment_start + offset + len) / page_bytes * page_bytes;
    if (end_page > first_page) {
        (void)::fallocate(a.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first_page),
                          static_cast<off_t>(end_page - first_page));
    }
    a.used -= len;
    auto [it, inserted] = a.free_blocks.emplace(offset, len);
    if (!inserted) return;  // cannot happen: a block is freed once
    // Merge with the next and the previous free block.
    auto next = std::next(it);
    if (next != a.free_blocks.end() && it->first + it->second == next->first) {
        it->second += next->second;
        a.free_blocks.erase(next);
    }
    if (it != a.free_blocks.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            a.free_blocks.erase(it);
        }
    }
}

bool arena_owns(const void* p) noexcept {
    const ArenaState& a = state();
    if (!arena_active()) return false;
    const auto* b = static_cast<const std::byte*>(p);
    return b >= a.own && b < a.own + a.segment;
}

void arena_note_fallback(std::size_t bytes) noexcept {
    if (bytes > state().segment) return;
    state().fallbacks.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t arena_id() noexcept {
    return arena_active() ? state().id : 0;
}

int arena_local_index() noexcept {
    return state().local_index;
}

std::optional<std::uint64_t> arena_offset(const void* p, std::size_t bytes) noexcept {
    const ArenaState& a = state();
    if (!arena_active()) return std::nullopt;
    const auto* b = static_cast<const std::byte*>(p);
    if (b < a.base || b > a.base + a.total || bytes > static_cast<std::size_t>(a.base + a.total - b)) {
        return std::nullopt;
    }
    return static_cast<std::uint64_t>(b - a.base);
}

std::byte* arena_address(std::uint64_t offset) noexcept {
    return state().base + offset;
}

std::optional<std::string> arena_full_warning() {
    ArenaState& a = state();
    if (a.fallbacks.load(std::memory_order_relaxed) == 0 || a.warned_full.load(std::memory_order_relaxed) ||
        a.warned_full.exchange(true)) {
        return std::nullopt;
    }
    std::size_t used = 0;
    {
        std::scoped_lock lock(a.mutex);
        used = a.used;
    }
    return fmt::format(
        "the shared-memory arena segment of this process is full ({} of {} in blocks): larger host tensors now come "
        "from private memory, and collectives on them use MPI. Raise shm_arena_size (LOCKSTEP_SHM_ARENA_SIZE) or free "
        "tensors you no longer need.",
        format_bytes(used), format_bytes(a.segment));
}

std::optional<std::string> arena_setup_warning() {
    const ArenaState& a = state();
    if (!a.reason_is_warning || a.local_index != 0) return std::nullopt;
    return a.reason;
}

}  // namespace detail

SharedMemoryStatus shared_memory_status() {
    detail::ArenaState& a = detail::state();
    SharedMemoryStatus s;
    s.active = detail::arena_active();
    s.local_processes = a.local_size;
    s.local_index = a.local_index;
    if (a.set_up) {
        s.mode = a.mode;
        s.threshold_bytes = a.threshold;
        s.backing = a.backing;
        s.reason = a.reason;
    } else {
        s.backing = "none";
        s.reason = "the runtime is not initialised";
        try {  // what the runtime would start with
            s.mode = config().shm;
            s.threshold_bytes = config().shm_threshold;
        } catch (const ConfigError& e) {
            s.threshold_bytes = Config{}.shm_threshold;
            s.reason += std::string("; the configuration cannot be resolved: ") + e.what();
        }
    }
    s.fallbacks = a.fallbacks.load(std::memory_order_relaxed);
    s.dev_shm_free_bytes = detail::dev_shm_free();
    if (s.active) {
        s.arena_bytes = a.segment;
        std::scoped_lock lock(a.mutex);
        s.used_bytes = a.used;
    }
    return s;
}

bool in_shared_memory(const void* p, std::size_t bytes) noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    return detail::arena_owns(p) && (bytes == 0 || detail::arena_owns(b + bytes - 1));
}

}  // namespace lockstep
