#include "fixed_record.hpp"
#include "rank_groups.hpp"
#include "world_hooks.hpp"

#include <lockstep/inventory.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/system.hpp>

#include <fmt/core.h>

#include <algorithm>

namespace lockstep {

std::string DeviceInventory::describe() const {
    const bool gpu = device.rfind("cuda", 0) == 0;
    return fmt::format("{} {}, {}, {} {}", gpu ? "cuda" : "cpu", name, format_bytes(memory_bytes), compute_units,
                       gpu ? "SMs" : "cores");
}

DeviceInventory local_inventory() {
    DeviceInventory inv;
    const ProcessIdentity id = current_identity();
    inv.rank = id.rank;
    inv.host = id.hostname;
    inv.kernel = kernel_release();
    const Device device = Runtime::initialized() ? Runtime::get().device() : Device::cpu();
    inv.device = device.str();
    if (auto gpu = device.is_cuda() ? cuda_device_facts(device.index()) : std::nullopt) {
        inv.name = gpu->name;
        inv.memory_bytes = gpu->memory_bytes;
        inv.compute_units = gpu->multiprocessors;
    } else {
        const HostFacts host = host_facts();
        inv.name = host.cpu_model;
        inv.compute_units = host.cpu_cores;
        inv.memory_bytes = host.ram_bytes;
        if (const auto limit = allocator_for(Device::cpu()).stats().limit_bytes) {
            inv.memory_bytes = std::min(inv.memory_bytes, *limit);
        }
    }
    return inv;
}

namespace {
// One rank's entry as it travels in the allgather.
struct InventoryRecord {
    detail::FixedText<64> host;
    detail::FixedText<16> device;
    detail::FixedText<96> name;
    detail::FixedText<64> kernel;
    std::uint64_t memory_bytes;
    std::int32_t compute_units;
    std::int32_t rank;
};
}  // namespace

std::vector<DeviceInventory> gather_inventory(Communicator& comm) {
    const DeviceInventory mine = local_inventory();
    InventoryRecord record{};
    record.host.assign(mine.host);
    record.device.assign(mine.device);
    record.name.assign(mine.name);
    record.kernel.assign(mine.kernel);
    record.memory_bytes = mine.memory_bytes;
    record.compute_units = mine.compute_units;
    record.rank = comm.rank();
    std::vector<DeviceInventory> out;
    for (const InventoryRecord& e : detail::allgather_fixed(comm, record)) {
        out.push_back(
            {e.rank, e.host.str(), e.device.str(), e.name.str(), e.memory_bytes, e.compute_units, e.kernel.str()});
    }
    return out;
}

std::optional<std::string> compare_inventories(const std::vector<DeviceInventory>& inventory) {
    std::vector<std::string> described;
    for (const auto& e : inventory) described.push_back(e.describe());
    if (std::all_of(described.begin(), described.end(), [&](const auto& d) { return d == described.front(); })) {
        return std::nullopt;
    }
    std::string text = "Processes run on different devices:\n" + detail::grouped_by_value(described);
    const auto smallest = std::min_element(inventory.begin(), inventory.end(), [](const auto& a, const auto& b) {
        return a.memory_bytes < b.memory_bytes;
    });
    std::vector<int> smallest_ranks;
    for (const auto& e : inventory) {
        if (e.memory_bytes == smallest->memory_bytes) smallest_ranks.push_back(e.rank);
    }
    text += fmt::format(
        "The smallest memory is {} ({} {}): it bounds the batch and model size of every process, since all processes "
        "run the same step. The slowest device paces all of them: every collective waits for it.",
        format_bytes(smallest->memory_bytes), smallest_ranks.size() == 1 ? "process" : "processes",
        base::format_rank_ranges(smallest_ranks));
    return text;
}

std::vector<DeviceInventory> run_startup_checks(Communicator& comm) {
    std::vector<DeviceInventory> inventory = gather_inventory(comm);
    const Logger log = get_logger("lockstep.system");
    // Kernels may differ between nodes: warn once per distinct release that is too old.
    std::vector<std::string> warned;
    for (const auto& e : inventory) {
        if (std::find(warned.begin(), warned.end(), e.kernel) != warned.end()) continue;
        warned.push_back(e.kernel);
        if (auto warning = kernel_warning(e.kernel)) log.warning("{} (host {})", *warning, e.host);
    }
    if (auto warning = compare_inventories(inventory)) log.warning("{}", *warning);
    return inventory;
}

namespace {
// Every job checks its devices and kernels once, when the world communicator is made.
[[maybe_unused]] const bool startup_checks_registered =
    detail::at_world_start([](Communicator& checks) { (void)run_startup_checks(checks); });
}  // namespace

}  // namespace lockstep
