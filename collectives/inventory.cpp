#include <lockstep/inventory.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/system.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

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
// Fixed-size form for the allgather.
struct WireInventory {
    char host[64];
    char device[16];
    char name[96];
    char kernel[64];
    std::uint64_t memory_bytes;
    std::int32_t compute_units;
    std::int32_t rank;
};
template <std::size_t N>
void put(char (&dst)[N], const std::string& s) {
    std::memset(dst, 0, N);
    std::memcpy(dst, s.data(), std::min(s.size(), N - 1));
}
template <std::size_t N>
std::string get(const char (&src)[N]) {
    return std::string(src, strnlen(src, N));
}
}  // namespace

std::vector<DeviceInventory> gather_inventory(Communicator& comm) {
    const DeviceInventory mine = local_inventory();
    WireInventory w{};
    put(w.host, mine.host);
    put(w.device, mine.device);
    put(w.name, mine.name);
    put(w.kernel, mine.kernel);
    w.memory_bytes = mine.memory_bytes;
    w.compute_units = mine.compute_units;
    w.rank = comm.rank();
    Tensor bytes = Tensor::from_data<std::uint8_t>(
        std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(&w), reinterpret_cast<const std::uint8_t*>(&w) + sizeof w),
        {static_cast<std::int64_t>(sizeof w)});
    const Tensor all = comm.allgather(bytes);
    std::vector<DeviceInventory> out(static_cast<std::size_t>(comm.size()));
    for (int r = 0; r < comm.size(); ++r) {
        WireInventory e;
        std::memcpy(&e, static_cast<const std::uint8_t*>(all.data()) + static_cast<std::size_t>(r) * sizeof e, sizeof e);
        out[static_cast<std::size_t>(r)] = {e.rank, get(e.host), get(e.device), get(e.name),
                                            e.memory_bytes, e.compute_units, get(e.kernel)};
    }
    return out;
}

std::optional<std::string> compare_inventories(const std::vector<DeviceInventory>& inventory) {
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (const auto& e : inventory) {
        const std::string key = e.describe();
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
        if (it == groups.end()) {
            groups.push_back({key, {e.rank}});
        } else {
            it->second.push_back(e.rank);
        }
    }
    if (groups.size() <= 1) return std::nullopt;
    std::string text = "Processes run on different devices:\n";
    for (const auto& [key, ranks] : groups) {
        text += fmt::format("  - {} {}: {}\n", ranks.size() == 1 ? "Process" : "Processes", format_rank_ranges(ranks),
                            key);
    }
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
        format_rank_ranges(smallest_ranks));
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

}  // namespace lockstep
