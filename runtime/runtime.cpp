#include <lockstep/allocator.hpp>
#include <lockstep/generator.hpp>
#include <lockstep/internal/arena.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

namespace lockstep {

namespace detail {
void set_current_cuda_device(int index);  // cuda_memory.cpp
}

std::string host_name() {
    std::array<char, HOST_NAME_MAX + 1> buffer{};
    if (gethostname(buffer.data(), buffer.size() - 1) != 0) return "unknown-host";
    return std::string(buffer.data());
}

namespace {

// The variables each launcher sets for its processes. The first family whose rank variable is present wins.
struct LauncherVariables {
    const char* rank;
    const char* size;
    const char* local_rank;
    const char* local_size;
};
constexpr std::array<LauncherVariables, 6> launcher_variables = {{
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"},
}};

std::optional<int> read_int(const EnvironmentLookup& env, const char* name, int minimum) {
    auto value = env(name);
    if (!value) return std::nullopt;
    int parsed = 0;
    const char* begin = value->data();
    const char* end = begin + value->size();
    auto [stop, ec] = std::from_chars(begin, end, parsed);
    if (ec != std::errc() || stop != end || parsed < minimum) {
        throw ConfigError(
            fmt::format("environment {}", name),
            fmt::format("'{}' is not an integer >= {}; the launcher's variables look corrupted", *value, minimum));
    }
    return parsed;
}

std::mutex runtime_mutex;

std::vector<std::function<void()>>& finalize_hooks() {
    static std::vector<std::function<void()>> hooks;
    return hooks;
}
std::mutex hooks_mutex;

std::vector<std::function<std::string()>>& report_sections() {
    static std::vector<std::function<std::string()>> sections;
    return sections;
}
std::unique_ptr<Runtime>& runtime_slot() {
    static std::unique_ptr<Runtime> slot;
    return slot;
}

}  // namespace

ProcessIdentity identity_from_environment(const EnvironmentLookup& env) {
    ProcessIdentity id;
    id.hostname = host_name();
    id.source = "default";
    for (const auto& vars : launcher_variables) {
        auto rank = read_int(env, vars.rank, 0);
        if (!rank) continue;
        id.rank = *rank;
        id.size = read_int(env, vars.size, 1).value_or(id.rank + 1);
        id.local_rank = read_int(env, vars.local_rank, 0).value_or(0);
        id.local_size = read_int(env, vars.local_size, 1).value_or(std::max(1, id.local_rank + 1));
        id.source = vars.rank;
        if (id.rank >= id.size) {
            throw ConfigError(fmt::format("environment {}", vars.rank),
                              fmt::format("rank {} is not below the size {} given by {}", id.rank, id.size, vars.size));
        }
        break;
    }
    return id;
}

ProcessIdentity current_identity() {
    {
        std::scoped_lock lock(runtime_mutex);
        if (runtime_slot()) return runtime_slot()->identity();
    }
    return identity_from_environment();
}

Device choose_device(int local_rank, int device_count) {
    if (device_count <= 0) return Device::cpu();
    return Device::cuda(local_rank % device_count);
}

Runtime& Runtime::init(const RuntimeOptions& options) {
    std::scoped_lock lock(runtime_mutex);
    auto& slot = runtime_slot();
    if (slot) return *slot;
    std::unique_ptr<Runtime> runtime(new Runtime());  // private constructor: make_unique cannot reach it
    runtime->setup(options);
    slot = std::move(runtime);
    return *slot;
}

bool Runtime::initialized() noexcept {
    std::scoped_lock lock(runtime_mutex);
    return runtime_slot() != nullptr;
}

Runtime& Runtime::get() {
    std::scoped_lock lock(runtime_mutex);
    if (!runtime_slot()) {
        throw Error(
            "lockstep::Runtime::get(): the runtime is not initialised; call lockstep::Runtime::init() "
            "(or create a lockstep::ScopedRuntime) first");
    }
    return *runtime_slot();
}

void Runtime::setup(const RuntimeOptions& options) {
    config_ = Config::resolve(options.config);

    int initialized = 0;
    int finalized = 0;
    LOCKSTEP_MPI_CHECK(MPI_Initialized(&initialized));
    LOCKSTEP_MPI_CHECK(MPI_Finalized(&finalized));
    if (finalized) {
        throw Error(
            "lockstep::Runtime::init(): MPI has already been finalised in this process and cannot be "
            "initialised again; initialise the runtime before MPI_Finalize");
    }
    if (!initialized) {
        // The level asked for (mpi_thread_level); Open MPI and MPICH give it or more on a node's processes.
        int required = MPI_THREAD_MULTIPLE;
        switch (config_.mpi_thread_level) {
            case ThreadLevel::Single:
                required = MPI_THREAD_SINGLE;
                break;
            case ThreadLevel::Funneled:
                required = MPI_THREAD_FUNNELED;
                break;
            case ThreadLevel::Serialized:
                required = MPI_THREAD_SERIALIZED;
                break;
            case ThreadLevel::Multiple:
                break;
        }
        LOCKSTEP_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, required, &thread_level_));
        owns_mpi_ = true;
    } else {
        LOCKSTEP_MPI_CHECK(MPI_Query_thread(&thread_level_));
    }

    // Our own duplicate: lockstep's traffic never mixes with the application's, and errors return codes to us
    // instead of aborting, without changing the handler of the application's communicator.
    MPI_Comm base = options.comm == MPI_COMM_NULL ? MPI_COMM_WORLD : options.comm;
    LOCKSTEP_MPI_CHECK(MPI_Comm_dup(base, &comm_));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_rank(comm_, &identity_.rank));
    LOCKSTEP_MPI_CHECK(MPI_Comm_size(comm_, &identity_.size));
    LOCKSTEP_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, identity_.rank, MPI_INFO_NULL, &local_comm_));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(local_comm_, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_rank(local_comm_, &identity_.local_rank));
    LOCKSTEP_MPI_CHECK(MPI_Comm_size(local_comm_, &identity_.local_size));

    // Nodes: one leader (local rank 0) per node. The node's index is the number of leaders of lower rank.
    int is_leader = identity_.local_rank == 0 ? 1 : 0;
    LOCKSTEP_MPI_CHECK(MPI_Allreduce(&is_leader, &identity_.node_count, 1, MPI_INT, MPI_SUM, comm_));
    int leaders_below = 0;
    LOCKSTEP_MPI_CHECK(MPI_Exscan(&is_leader, &leaders_below, 1, MPI_INT, MPI_SUM, comm_));
    if (identity_.rank == 0) leaders_below = 0;  // MPI leaves rank 0's Exscan result undefined
    identity_.node_index = leaders_below;
    LOCKSTEP_MPI_CHECK(MPI_Bcast(&identity_.node_index, 1, MPI_INT, 0, local_comm_));
    identity_.hostname = host_name();
    identity_.source = "MPI";

    device_ = choose_device(identity_.local_rank, cuda_device_count());
    if (device_.is_cuda()) detail::set_current_cuda_device(device_.index());

    detail::install_config(config_);
    allocator_for(Device::cpu()).set_limit(config_.cpu_memory_limit);
    detail::setup_arena(local_comm_, config_);
    default_generator().manual_seed(config_.seed);
}

void detail::at_runtime_finalize(std::function<void()> hook) {
    std::scoped_lock lock(hooks_mutex);
    finalize_hooks().push_back(std::move(hook));
}

void detail::at_runtime_report(std::function<std::string()> section) {
    std::scoped_lock lock(hooks_mutex);
    report_sections().push_back(std::move(section));
}

std::string Runtime::report() {
    (void)get();  // throws when not initialised
    std::vector<std::function<std::string()>> sections;
    {
        std::scoped_lock lock(hooks_mutex);
        sections = report_sections();
    }
    std::string text;
    for (const auto& section : sections) text += section();
    return text;
}

void Runtime::finalize() {
    if (!initialized()) return;
    std::vector<std::function<void()>> hooks;
    {
        std::scoped_lock lock(hooks_mutex);
        hooks.swap(finalize_hooks());
        report_sections().clear();  // they belong to this initialisation's communicators
    }
    for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
    std::scoped_lock lock(runtime_mutex);
    auto& slot = runtime_slot();
    if (!slot) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        if (slot->local_comm_ != MPI_COMM_NULL) LOCKSTEP_MPI_CHECK(MPI_Comm_free(&slot->local_comm_));
        if (slot->comm_ != MPI_COMM_NULL) LOCKSTEP_MPI_CHECK(MPI_Comm_free(&slot->comm_));
        if (slot->owns_mpi_) LOCKSTEP_MPI_CHECK(MPI_Finalize());
    }
    slot.reset();
}

Runtime::~Runtime() = default;

}  // namespace lockstep
