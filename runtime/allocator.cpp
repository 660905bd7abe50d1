#include <lockstep/allocator.hpp>
#include <lockstep/base/byte_size.hpp>
#include <lockstep/config.hpp>
#include <lockstep/internal/arena.hpp>
#include <lockstep/internal/warnings.hpp>

#include <fmt/core.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <system_error>
#include <vector>

namespace lockstep {

namespace {
// The large-block granule, and the size from which host blocks get a huge-page mapping of their own: one 2 MiB
// transparent huge page on x86-64 and most other Linux targets.
constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;
}  // namespace

std::string format_bytes(std::size_t bytes) {
    return base::format_bytes(bytes);
}

std::size_t parse_bytes(std::string_view text) {
    std::string why;
    if (const auto bytes = base::parse_bytes(text, &why)) return *bytes;
    throw InvalidArgumentError(fmt::format(
        "invalid memory size {}: {}; write a number of bytes with an optional unit, e.g. 512MiB, 2GiB, 1.5GB",
        detail::quote_value(text), why));
}

OutOfMemoryError::OutOfMemoryError(Device device, std::size_t requested_bytes, AllocatorStats stats, std::string detail)
    : Error([&] {
          std::string msg =
              fmt::format("{} out of memory: tried to allocate {}; ", device.str(), format_bytes(requested_bytes));
          if (stats.limit_bytes) msg += fmt::format("limit {}, ", format_bytes(*stats.limit_bytes));
          msg += fmt::format("{} in use, {} cached", format_bytes(stats.allocated_bytes),
                             format_bytes(stats.cached_bytes));
          if (!detail.empty()) msg += "; " + detail;
          msg += device.is_cpu() ? ". Reduce the batch or model size, free tensors you no longer need, or raise "
                                   "cpu_memory_limit (LOCKSTEP_CPU_MEMORY_LIMIT)."
                                 : ". Reduce the batch or model size, free tensors you no longer need, or call "
                                   "empty_all_caches() if another library needs the memory.";
          return msg;
      }()),
      device_(device),
      requested_(requested_bytes),
      stats_(stats) {}

// ------------------------------------------------------------------------------------------ the caching allocator

Allocator::~Allocator() = default;

std::size_t Allocator::round_size(std::size_t bytes) noexcept {
    constexpr std::size_t small_granule = 512;
    constexpr std::size_t large_threshold = std::size_t{1} << 20;
    constexpr std::size_t large_granule = huge_page_bytes;
    if (bytes == 0) return small_granule;
    const std::size_t granule = bytes < large_threshold ? small_granule : large_granule;
    return (bytes + granule - 1) / granule * granule;
}

void* Allocator::allocate(std::size_t bytes, std::size_t* block_bytes) {
    const std::size_t size = round_size(bytes);
    std::unique_lock lock(mutex_);
    auto hand_out = [&](void* ptr, std::size_t block) {
        stats_.allocated_bytes += block;
        stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.allocated_bytes);
        ++stats_.num_allocations;
        if (block_bytes != nullptr) *block_bytes = block;
        return ptr;
    };
    // Best fit among cached blocks no more than twice the size, so that a small tensor never pins a huge block.
    // Buckets stay in the map when empty: their vectors keep their capacity and the hot path never allocates.
    for (auto it = cache_.lower_bound(size); it != cache_.end() && it->first <= 2 * size; ++it) {
        if (it->second.empty()) continue;
        void* ptr = it->second.back();
        it->second.pop_back();
        stats_.cached_bytes -= it->first;
        ++stats_.cache_hits;
        return hand_out(ptr, it->first);
    }
    if (stats_.limit_bytes) {
        const std::size_t limit = *stats_.limit_bytes;
        if (stats_.allocated_bytes + size > limit) {
            throw OutOfMemoryError(device_, bytes, stats_);
        }
        if (stats_.reserved_bytes() + size > limit) {
            release_cached_locked(stats_.reserved_bytes() + size - limit);
        }
    }
    // Make room for this block's return to the cache now, so that deallocate() never needs memory.
    cache_[size].reserve(live_blocks_[size] + 1);
    void* ptr = system_allocate(size);
    if (ptr == nullptr && stats_.cached_bytes > 0) {
        release_cached_locked(stats_.cached_bytes);
        ptr = system_allocate(size);
    }
    if (ptr == nullptr) {
        throw OutOfMemoryError(device_, bytes, stats_, "the system refused the allocation");
    }
    ++stats_.system_allocations;
    ++live_blocks_[size];
    return hand_out(ptr, size);
}

void Allocator::deallocate(void* ptr, std::size_t block_bytes) noexcept {
    if (ptr == nullptr) return;
    std::unique_lock lock(mutex_);
    stats_.allocated_bytes -= block_bytes;
    ++stats_.num_frees;
    auto it = cache_.find(block_bytes);
    if (it != cache_.end() && it->second.size() < it->second.capacity()) {
        it->second.push_back(ptr);
        stats_.cached_bytes += block_bytes;
    } else {  // no reserved slot (cannot happen for blocks from allocate()): give the block back instead
        system_free(ptr, block_bytes);
        --live_blocks_[block_bytes];
    }
}

void Allocator::release_cached_locked(std::size_t want_bytes) noexcept {
    // Largest blocks first: fewest system calls to free the room asked for.
    std::size_t released = 0;
    for (auto it = cache_.rbegin(); it != cache_.rend() && released < want_bytes; ++it) {
        auto& blocks = it->second;
        while (!blocks.empty() && released < want_bytes) {
            system_free(blocks.back(), it->first);
            blocks.pop_back();
            --live_blocks_[it->first];
            released += it->first;
            stats_.cached_bytes -= it->first;
        }
    }
}

void Allocator::release_all_cached() noexcept {
    std::unique_lock lock(mutex_);
    release_cached_locked(stats_.cached_bytes);
    // A bucket only has to hold room for the blocks of its size that are still out. Once none is, it is dropped, so
    // that the bookkeeping of every size ever used does not stay scattered over pages the system could take back.
    for (auto it = live_blocks_.begin(); it != live_blocks_.end();) {
        if (it->second == 0) {
            cache_.erase(it->first);
            it = live_blocks_.erase(it);
        } else {
            ++it;
        }
    }
}

void Allocator::empty_cache() {
    release_all_cached();
    system_trim();
}

AllocatorStats Allocator::stats() const {
    std::unique_lock lock(mutex_);
    return stats_;
}

void Allocator::reset_peak() {
    std::unique_lock lock(mutex_);
    stats_.peak_bytes = stats_.allocated_bytes;
}

void Allocator::set_limit(std::optional<std::size_t> limit_bytes) {
    std::unique_lock lock(mutex_);
    stats_.limit_bytes = limit_bytes;
    if (limit_bytes && stats_.reserved_bytes() > *limit_bytes) {
        release_cached_locked(stats_.reserved_bytes() - *limit_bytes);
    }
}

// ------------------------------------------------------------------------------------------ host memory

namespace {

class HostAllocator final : public Allocator {
public:
    HostAllocator() : Allocator(Device::cpu()) {}
    ~HostAllocator() override { release_all_cached(); }

protected:
    // Blocks of 2 MiB and more (every request from 1 MiB up rounds to whole 2 MiB granules) are mapped on their own,
    // aligned to 2 MiB and offered to the kernel for transparent huge pages. Copies between processes (the shared
    // memory transport's single-copy path) pin and walk the pages of a buffer, and a huge page replaces 512 small ones:
    // a 16 MiB broadcast between two local ranks takes about a third of the time of the same call on malloc'd memory
    // (docs/benchmarks.md). The kernel's policy decides: with transparent_hugepage=never the hint changes nothing.
    // While the node's shared-memory arena is active, blocks of at least its threshold come from this process's
    // segment of it (shared_memory.cpp), so that the other processes of the node can read them; a full segment
    // falls back to the private memory below.
    void* system_allocate(std::size_t bytes) override {
        if (detail::arena_active() && bytes >= detail::arena_threshold()) {
            if (void* block = detail::arena_allocate(bytes)) return block;
            detail::arena_note_fallback(bytes);
        }
        if (bytes < huge_block) {
            // 64-byte alignment: a cache line, and enough for AVX-512 loads. Sizes are multiples of 512 already.
            return std::aligned_alloc(64, bytes);
        }
        // Map one huge page more than needed, then unmap the unaligned head and the rest of the tail.
        const std::size_t span = bytes + huge_block;
        void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) return nullptr;  // the caller releases its cache and retries, then reports OOM
        const auto start = reinterpret_cast<std::uintptr_t>(raw);
        const std::uintptr_t aligned = (start + huge_block - 1) / huge_block * huge_block;
        const std::size_t head = aligned - start;
        const std::size_t tail = span - head - bytes;
        // munmap of a page-aligned part of our own fresh mapping cannot fail short of a kernel bug; if it did, the
        // pages would only stay mapped until exit, so the block is still handed out.
        if (head > 0) (void)::munmap(raw, head);
        if (tail > 0) (void)::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
        void* block = reinterpret_cast<void*>(aligned);
        // A hint: EINVAL on kernels built without transparent huge pages leaves ordinary pages, which work the same.
        (void)::madvise(block, bytes, MADV_HUGEPAGE);
        return block;
    }
    void system_free(void* ptr, std::size_t bytes) noexcept override {
        if (detail::arena_owns(ptr)) {
            detail::arena_free(ptr, bytes);
        } else if (bytes < huge_block) {
            discard_whole_pages(ptr, bytes);
            std::free(ptr);
        } else {
            (void)::munmap(ptr, bytes);  // the exact range mapped above
        }
    }

    // Trims every malloc arena: free memory between blocks still in use goes back too, not only the top of the heap.
    void system_trim() noexcept override { (void)::malloc_trim(0); }

private:
    // The C library keeps freed blocks for reuse, resident, and hands them out again for any size: left alone, the
    // blocks the cap made us release pile up beyond the cap (1.5x it in bench runs) and outlive empty_cache(). The
    // pages that lie wholly inside a block are discarded before the block goes back, so that what the C library
    // keeps costs no memory until it is reused; only the partial pages at the ends and blocks under a page stay.
    static void discard_whole_pages(void* ptr, std::size_t bytes) noexcept {
        static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        const auto start = reinterpret_cast<std::uintptr_t>(ptr);
        const std::uintptr_t first = (start + page - 1) / page * page;
        const std::uintptr_t last = (start + bytes) / page * page;
        // MADV_DONTNEED, not MADV_FREE: the pages leave the resident set now, not when the kernel runs short.
        if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    }

    static constexpr std::size_t huge_block = huge_page_bytes;
};

}  // namespace

namespace detail {
Allocator& cuda_allocator(int index);  // cuda_memory.cpp
Allocator& pinned_host_allocator();    // cuda_memory.cpp
}  // namespace detail

Allocator& allocator_for(Device device) {
    if (device.is_cuda()) return detail::cuda_allocator(device.index());
    // Function-local static: constructed on first use, after which the cap follows the resolved Config.
    static HostAllocator host;
    static std::once_flag limit_applied;
    std::call_once(limit_applied, [] { host.set_limit(config().cpu_memory_limit); });
    return host;
}

Allocator& pinned_allocator() {
    return detail::pinned_host_allocator();
}

Storage::Storage(Allocator& allocator, std::size_t bytes)
    : allocator_(&allocator),
      bytes_(bytes),
      data_(allocator.allocate(bytes, &block_bytes_)),
      device_(allocator.device()) {
    // The first block that did not fit in this process's arena segment is said once (an atomic load otherwise).
    if (auto warning = detail::arena_full_warning()) detail::warn("lockstep.memory", *warning);
}

Storage::Storage(ForeignKey, void* data, std::size_t bytes, Device device, std::function<void()> release,
                 bool read_only)
    : allocator_(nullptr),
      bytes_(bytes),
      data_(data),
      device_(device),
      read_only_(read_only),
      release_(std::move(release)) {}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t bytes, Device device, std::function<void()> release,
                                       bool read_only) {
    return std::make_shared<Storage>(ForeignKey{}, data, bytes, device, std::move(release), read_only);
}

Storage::~Storage() {
    if (allocator_ != nullptr) {
        allocator_->deallocate(data_, block_bytes_);
        return;
    }
    // Moved into a local, so that the owner's callback (and what it captures, a Python object, say) is the last thing
    // this destructor touches, under no lock.
    if (std::function<void()> release = std::move(release_)) release();
}

}  // namespace lockstep
