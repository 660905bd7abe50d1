#pragma once
// Caching allocators, one per device, with statistics and an optional cap.
//
// Blocks are rounded up (512 B below 1 MiB, 2 MiB granules above) and, when freed, kept in a cache keyed by size so
// that the next allocation of a similar size reuses them without a system call. A request is served by the smallest
// cached block that is at least as large and at most twice as large; statistics count whole blocks. Under a cap
// (`cpu_memory_limit` for the host), in-use plus cached bytes never exceed the limit: a request that would pass it
// first releases cached blocks, and if the blocks in use alone leave no room it throws OutOfMemoryError and changes
// nothing. Host blocks of 2 MiB and more are mapped on their own, 2 MiB-aligned and offered to transparent huge pages
// (see allocator.cpp).

#include <lockstep/device.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/export.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

struct AllocatorStats {
    std::size_t allocated_bytes = 0;    // in blocks handed out and not yet returned (rounded sizes)
    std::size_t cached_bytes = 0;       // in blocks returned and kept for reuse
    std::size_t peak_bytes = 0;         // highest allocated_bytes seen since construction or reset_peak()
    std::uint64_t num_allocations = 0;  // requests served
    std::uint64_t num_frees = 0;
    std::uint64_t cache_hits = 0;            // requests served from the cache
    std::uint64_t system_allocations = 0;    // requests that went to the system (malloc, cudaMalloc, cudaHostAlloc)
    std::optional<std::size_t> limit_bytes;  // cap on allocated + cached, if any

    [[nodiscard]] std::size_t reserved_bytes() const { return allocated_bytes + cached_bytes; }
};

// Formats a byte count for people: "512 B", "1.50 KiB", "2.00 GiB", up to EiB, cut (not rounded) to two decimals;
// parse_bytes reads every result back, to within its last decimal.
[[nodiscard]] LOCKSTEP_API std::string format_bytes(std::size_t bytes);
// Parses "512MiB", "2GiB", "1.5GB", "64k", "1048576" (binary units for K/M/G/T/P/E with or without "iB", decimal for
// KB/MB/GB/TB/PB/EB, any case), up to the largest std::size_t; a whole number is exact, a fraction is rounded to the
// nearest byte. Throws InvalidArgumentError for anything else.
[[nodiscard]] LOCKSTEP_API std::size_t parse_bytes(std::string_view text);

// An allocator ran out of memory. Carries the device, the request and the allocator's statistics at the time.
class LOCKSTEP_API OutOfMemoryError : public Error {
public:
    OutOfMemoryError(Device device, std::size_t requested_bytes, AllocatorStats stats, std::string detail = {});
    [[nodiscard]] Device device() const noexcept { return device_; }
    [[nodiscard]] std::size_t requested_bytes() const noexcept { return requested_; }
    [[nodiscard]] const AllocatorStats& stats() const noexcept { return stats_; }

private:
    Device device_;
    std::size_t requested_;
    AllocatorStats stats_;
};

class LOCKSTEP_API Allocator {
public:
    explicit Allocator(Device device) : device_(device) {}
    virtual ~Allocator();
    Allocator(const Allocator&) = delete;
    Allocator& operator=(const Allocator&) = delete;

    // Returns a block of at least `bytes` bytes (64-byte aligned on the host, 256 on CUDA) and stores its size in
    // *block_bytes; throws OutOfMemoryError. A zero-byte request returns a valid, unique, non-null pointer.
    [[nodiscard]] void* allocate(std::size_t bytes, std::size_t* block_bytes);
    // Returns a block to the cache; `block_bytes` is the size allocate() reported for it.
    void deallocate(void* ptr, std::size_t block_bytes) noexcept;

    [[nodiscard]] AllocatorStats stats() const;
    // Gives every cached block back to the system.
    void empty_cache();
    void reset_peak();
    // Sets or clears the cap. Lowering it below what is reserved releases cached blocks; blocks in use stay.
    void set_limit(std::optional<std::size_t> limit_bytes);

    [[nodiscard]] Device device() const noexcept { return device_; }
    // Size actually reserved for a request of `bytes`.
    [[nodiscard]] static std::size_t round_size(std::size_t bytes) noexcept;

protected:
    // The system calls behind the cache. system_allocate returns nullptr when the system is out of memory.
    virtual void* system_allocate(std::size_t bytes) = 0;
    virtual void system_free(void* ptr, std::size_t bytes) noexcept = 0;
    // Gives memory that the system allocator kept after system_free back to the operating system; empty_cache()
    // calls it after releasing the cache.
    virtual void system_trim() noexcept {}
    // Called by derived destructors: returns every cached block to the system.
    void release_all_cached() noexcept;

private:
    void release_cached_locked(std::size_t want_bytes) noexcept;

    Device device_;
    mutable std::mutex mutex_;
    std::map<std::size_t, std::vector<void*>> cache_;  // block size -> free blocks (capacity for every live block)
    std::map<std::size_t, std::size_t> live_blocks_;   // block size -> blocks obtained from the system
    AllocatorStats stats_;
};

// The allocator of a device: the host allocator for cpu, the caching cudaMalloc allocator of device N for cuda:N
// (DeviceError in a build without CUDA or for a device that does not exist). Allocators live until process exit.
[[nodiscard]] LOCKSTEP_API Allocator& allocator_for(Device device);
// Page-locked host memory for staging copies to and from CUDA devices (plain aligned host memory without CUDA).
[[nodiscard]] LOCKSTEP_API Allocator& pinned_allocator();
// Releases the cached blocks of every allocator created so far.
LOCKSTEP_API void empty_all_caches();

// A reference-counted block of memory, in one of two forms. Owned: allocated from an Allocator, and returned to it when
// the last Storage handle drops. Foreign (wrap): memory that lockstep did not allocate (a numpy array, a DLPack tensor,
// a caller's buffer), which the caller keeps valid until `release` runs; it is not counted in any allocator's
// statistics and never lies in the shared-memory arena as far as lockstep is concerned.
class LOCKSTEP_API Storage {
    struct ForeignKey {  // lets wrap() use make_shared with a constructor nobody else can call
        explicit ForeignKey() = default;
    };

public:
    Storage(Allocator& allocator, std::size_t bytes);
    // Foreign memory: `bytes` bytes at `data` on `device`, taken as they are (no check, no copy). `release` runs
    // exactly once, when the last handle drops, as the last thing the destructor does, once nothing of this Storage
    // is used any more, and under no lock of lockstep's; an empty `release` is never called. It runs in a destructor,
    // so it must not throw. If wrap throws, nothing was taken over and `release` is not called. `read_only` says that
    // the memory itself must not be written (a read-only numpy array, say): no tensor over it can be made writable.
    [[nodiscard]] static std::shared_ptr<Storage> wrap(void* data, std::size_t bytes, Device device,
                                                       std::function<void()> release, bool read_only = false);
    Storage(ForeignKey, void* data, std::size_t bytes, Device device, std::function<void()> release, bool read_only);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    [[nodiscard]] void* data() const noexcept { return data_; }
    [[nodiscard]] std::size_t nbytes() const noexcept { return bytes_; }
    [[nodiscard]] Device device() const noexcept { return device_; }
    // Whether the memory is foreign (wrap) rather than a block of an allocator.
    [[nodiscard]] bool foreign() const noexcept { return allocator_ == nullptr; }
    // Whether the memory was wrapped read-only (always false for owned memory).
    [[nodiscard]] bool read_only() const noexcept { return read_only_; }

private:
    Allocator* allocator_;  // null for foreign memory
    std::size_t bytes_;
    std::size_t block_bytes_ = 0;
    void* data_;
    Device device_;
    bool read_only_ = false;
    std::function<void()> release_;  // foreign memory only
};

}  // namespace lockstep
