#pragma once
// The device inventory of a job and the start-up checks.
//
// Every rank describes its device (GPU name, memory, SM count; or CPU model, cores and the memory it may use) and one
// MPI_Allgather gives every rank the whole table. When the ranks differ, the main process warns which ranks differ,
// which memory is the smallest (it bounds the batch and model size of every rank), and that the slowest device paces
// all of them. The start-up checks (run once, when Communicator::world() is first created) add a warning for Linux
// kernels older than 5.5.

#include <lockstep/communicator.hpp>
#include <lockstep/export.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

struct LOCKSTEP_API DeviceInventory {
    int rank = 0;
    std::string host;
    std::string device;            // "cpu" or "cuda:N"
    std::string name;              // GPU name, or CPU model
    std::size_t memory_bytes = 0;  // GPU memory, or host RAM (the cpu_memory_limit when lower)
    int compute_units = 0;         // streaming multiprocessors, or CPU cores
    std::string kernel;            // uname -r

    // "cuda NVIDIA H200, 139.81 GiB, 132 SMs" or "cpu Intel Xeon ..., 2 cores, 23.45 GiB": what must match.
    [[nodiscard]] std::string describe() const;
};

// This process's entry (rank from the current identity).
[[nodiscard]] LOCKSTEP_API DeviceInventory local_inventory();
// Collective over `comm`: every rank's entry, in rank order.
[[nodiscard]] LOCKSTEP_API std::vector<DeviceInventory> gather_inventory(Communicator& comm);
// The warning for a table whose ranks differ, nullopt when they all match.
[[nodiscard]] LOCKSTEP_API std::optional<std::string> compare_inventories(
    const std::vector<DeviceInventory>& inventory);
// Collective over `comm`: gathers the inventory; the main process logs the kernel and inventory warnings.
// Returns the inventory.
LOCKSTEP_API std::vector<DeviceInventory> run_startup_checks(Communicator& comm);

}  // namespace lockstep
