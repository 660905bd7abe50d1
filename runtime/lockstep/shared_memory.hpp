#pragma once
// The node's shared-memory arena for host tensors.
//
// When the Runtime starts, the processes of each node (its MPI_COMM_TYPE_SHARED split) map one POSIX shared-memory
// object, each process owning an equal segment of it; the object's name is unlinked as soon as every process of the
// node has mapped it, so nothing is left in /dev/shm however the job ends. From then on the host allocator takes
// blocks of at least `shm_threshold` bytes from the process's segment (falling back to private memory when the
// segment is full), and collectives whose every tensor lies in the arena read and write the peers' tensors directly
// (collectives/shm/). Config: `shm` (auto|on|off), `shm_arena_size`, `shm_threshold`.

#include <lockstep/config.hpp>
#include <lockstep/export.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep {

struct SharedMemoryStatus {
    bool active = false;  // this process allocates host blocks from the node's arena
    ShmMode mode = ShmMode::Auto;
    std::size_t arena_bytes = 0;         // this process's segment
    std::size_t threshold_bytes = 0;     // host blocks of at least this size come from the arena
    std::size_t used_bytes = 0;          // of the segment, in blocks now (in use or cached by the allocator)
    std::uint64_t fallbacks = 0;         // blocks that went to private memory because the segment was full
    int local_processes = 1;             // processes that map the arena
    int local_index = 0;                 // this process's segment
    std::size_t dev_shm_free_bytes = 0;  // free space in /dev/shm now
    std::string backing;                 // where the pages are, e.g. "/dev/shm (POSIX shared memory, name unlinked)"
    std::string reason;                  // why the arena is not active, or the warning it fell back with; empty if none
};

// The arena's state in this process (inactive before Runtime::init()).
[[nodiscard]] LOCKSTEP_API SharedMemoryStatus shared_memory_status();
// Whether [p, p + bytes) lies in this process's segment of the arena.
[[nodiscard]] LOCKSTEP_API bool in_shared_memory(const void* p, std::size_t bytes) noexcept;

}  // namespace lockstep
