#pragma once
// The node's shared-memory arena (internal): set up by the Runtime, used by the host allocator and by the
// shared-memory collectives. The public view is lockstep/shared_memory.hpp.
//
// One POSIX shared-memory object per node, of local_processes equal segments; every process of the node maps all of
// it at an address of its own. A place in the arena is therefore named between processes by its offset from the
// start of the object, never by a pointer. Each process allocates only from its own segment.

#include <lockstep/config.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace lockstep::detail {

// Sets up the arena over `local_comm` (collective over it): every process of the node maps the same object or none
// does. Once per process; later calls (a second Runtime::init on an MPI the host owns) keep the arena there is.
void setup_arena(MPI_Comm local_comm, const Config& config);

// Whether this process's allocations come from the arena, and the smallest block that does.
[[nodiscard]] bool arena_active() noexcept;
[[nodiscard]] std::size_t arena_threshold() noexcept;
[[nodiscard]] std::size_t arena_small_max() noexcept;  // shm_small_max
// A block of `bytes` (rounded up to 512) from this process's segment, 512-byte aligned, its pages reserved in the
// backing file; nullptr when the segment has no room (the caller falls back to private memory).
[[nodiscard]] void* arena_allocate(std::size_t bytes) noexcept;
// Gives a block from arena_allocate back (its pages are released to the system).
void arena_free(void* p, std::size_t bytes) noexcept;
// Whether p lies in this process's segment (the only one its blocks come from).
[[nodiscard]] bool arena_owns(const void* p) noexcept;
// Counts a block of `bytes` that went to private memory because the segment was full (arena_full_warning says so
// once). A block larger than the whole segment is not counted: it could never fit, and the segment is not full.
void arena_note_fallback(std::size_t bytes) noexcept;

// The warnings to log once: the segment became full (every process, the first time it fell back), and the arena could
// not be set up (the node's first process only, so that a node says it once).
[[nodiscard]] std::optional<std::string> arena_full_warning();
[[nodiscard]] std::optional<std::string> arena_setup_warning();

// The arena's identity (equal on every process of a node that mapped the same object; 0 when inactive), this
// process's segment, and the translation between offsets and this process's addresses.
[[nodiscard]] std::uint64_t arena_id() noexcept;
[[nodiscard]] int arena_local_index() noexcept;
// Offset of [p, p + bytes) from the start of the object, if it lies wholly in the arena (any segment).
[[nodiscard]] std::optional<std::uint64_t> arena_offset(const void* p, std::size_t bytes) noexcept;
[[nodiscard]] std::byte* arena_address(std::uint64_t offset) noexcept;

}  // namespace lockstep::detail
