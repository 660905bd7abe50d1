#pragma once
// A batch size that every rank can run, found by trying and agreed by all ranks; and the arithmetic between
// per-process and global batch sizes.
//
// find_executable_batch_size(start, fn) calls fn(batch_size) on every rank. After each try the ranks agree, in one
// MPI_Allreduce, on the worst outcome: if any rank ran out of memory (OutOfMemoryError, CPU or CUDA, recognised by
// type) every rank frees its cached memory and retries with the same smaller size; if any rank raised another error,
// every rank stops (the rank that raised it rethrows it, the others throw DistributedOperationError naming it).
// So all ranks end on the same size even when only one of them lacks memory.
//
// fn must not leave collectives half done when it throws: make the large allocations before the first collective
// inside fn (a rank that throws before a collective the others are in would leave them waiting; the watchdog then
// reports it as a hang).

#include <lockstep/communicator.hpp>
#include <lockstep/export.hpp>

#include <cstdint>
#include <functional>

namespace lockstep {

struct BatchSizeOptions {
    double factor = 0.5;         // next size after an OOM: floor(size * factor), in (0, 1)
    std::int64_t minimum = 1;    // sizes below it are not tried; reaching it ends the search with an error
    bool refine_upward = false;  // after the first size that fits, search between it and the last size that did
                                 // not (binary search), ending on the largest size that fits
};

struct BatchSizeResult {
    std::int64_t batch_size = 0;  // the size the last successful fn call used
    int attempts = 0;             // calls of fn on this rank
    int out_of_memory_retries = 0;
};

// Runs fn(size) until it succeeds on every rank; see the comment above. Throws Error "No executable batch size found,
// reached zero." (or "... below the minimum of N.") when sizes run out.
LOCKSTEP_API BatchSizeResult find_executable_batch_size(std::int64_t starting_batch_size,
                                                        const std::function<void(std::int64_t)>& fn,
                                                        const BatchSizeOptions& options = {},
                                                        Communicator& comm = Communicator::world());

// Releases every allocator's cached blocks (CPU, pinned, CUDA): what an OOM retry does before the next try.
LOCKSTEP_API void free_memory();

// per_process * processes.
[[nodiscard]] LOCKSTEP_API std::int64_t global_batch_size(std::int64_t per_process, int processes);
// global / processes; InvalidArgumentError when it does not divide evenly.
[[nodiscard]] LOCKSTEP_API std::int64_t per_process_batch_size(std::int64_t global, int processes);
// Logs a warning (main process) when the global batch differs from the one a run was tuned for because the number of
// processes changed, with the learning-rate scaling that keeps training comparable. Returns the new global batch.
LOCKSTEP_API std::int64_t check_global_batch_size(std::int64_t per_process, int processes,
                                                  std::int64_t tuned_global_batch, double tuned_learning_rate);

}  // namespace lockstep
