#pragma once
// Process identity and the MPI context.
//
// Identity (rank, size, local rank/size) is readable before MPI is initialised, from the launcher's variables, so
// that logging works early. Runtime::init() initialises MPI once (MPI_THREAD_MULTIPLE requested), or adopts an MPI that
// the host program already initialised and, optionally, a communicator it supplies. Runtime::finalize() calls
// MPI_Finalize only if lockstep called MPI_Init.

#include <lockstep/config.hpp>
#include <lockstep/device.hpp>
#include <lockstep/dtype.hpp>
#include <lockstep/export.hpp>

#include <mpi.h>

#include <functional>
#include <optional>
#include <string>

namespace lockstep {

struct ProcessIdentity {
    int rank = 0;
    int size = 1;
    int local_rank = 0;
    int local_size = 1;
    int node_count = 1;  // known only once MPI is up; 1 (single node assumed) before
    int node_index = 0;  // which node this process is on, 0..node_count-1 (ordered by the lowest rank on each node)
    std::string hostname;
    std::string source;  // where the numbers came from: "MPI", "OMPI_COMM_WORLD_RANK", ..., or "default"

    [[nodiscard]] bool is_main_process() const noexcept { return rank == 0; }
    [[nodiscard]] bool is_local_main_process() const noexcept { return local_rank == 0; }
};

// Identity from the launcher's variables (OpenMPI OMPI_COMM_WORLD_*, PMIx PMIX_RANK, Hydra/Intel PMI_*, Slurm
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, MVAPICH MV2_COMM_WORLD_*), without MPI. Rank 0 of 1 if none is set.
[[nodiscard]] LOCKSTEP_API ProcessIdentity
identity_from_environment(const EnvironmentLookup& env = process_environment());
// The Runtime's identity once initialised, else identity_from_environment().
[[nodiscard]] LOCKSTEP_API ProcessIdentity current_identity();
[[nodiscard]] LOCKSTEP_API std::string host_name();

// The device a process should use: cuda:(local_rank % device_count) when CUDA devices exist, else cpu.
[[nodiscard]] LOCKSTEP_API Device choose_device(int local_rank, int cuda_device_count);

struct RuntimeOptions {
    ConfigOverrides config;
    // Communicator to run on; MPI_COMM_NULL means MPI_COMM_WORLD. lockstep duplicates it and never frees the user's.
    MPI_Comm comm = MPI_COMM_NULL;
};

class LOCKSTEP_API Runtime {
public:
    // Initialises (or adopts) MPI and resolves the Config. Idempotent: a second call returns the same Runtime.
    static Runtime& init(const RuntimeOptions& options = {});
    [[nodiscard]] static bool initialized() noexcept;
    // The initialised Runtime; throws Error if init() has not been called.
    [[nodiscard]] static Runtime& get();
    // Frees lockstep's communicators and calls MPI_Finalize if lockstep initialised MPI. Idempotent.
    static void finalize();
    // Collective over every process: the end-of-run report of every layer that registered one (the straggler table
    // of the collectives), logged on the main process and returned.
    static std::string report();

    [[nodiscard]] const ProcessIdentity& identity() const noexcept { return identity_; }
    [[nodiscard]] const Config& config() const noexcept { return config_; }
    [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }              // lockstep's duplicate of the user comm
    [[nodiscard]] MPI_Comm local_comm() const noexcept { return local_comm_; }  // processes on this node
    [[nodiscard]] Device device() const noexcept { return device_; }
    [[nodiscard]] bool owns_mpi() const noexcept { return owns_mpi_; }
    [[nodiscard]] int thread_level() const noexcept { return thread_level_; }

    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;
    ~Runtime();

private:
    Runtime() = default;
    void setup(const RuntimeOptions& options);

    ProcessIdentity identity_;
    Config config_;
    MPI_Comm comm_ = MPI_COMM_NULL;
    MPI_Comm local_comm_ = MPI_COMM_NULL;
    Device device_;
    bool owns_mpi_ = false;
    int thread_level_ = 0;
};

// Initialises on construction and finalises on destruction: `lockstep::ScopedRuntime rt;` at the top of main().
class ScopedRuntime {
public:
    explicit ScopedRuntime(const RuntimeOptions& options = {}) : runtime_(&Runtime::init(options)) {}
    ~ScopedRuntime() { Runtime::finalize(); }
    ScopedRuntime(const ScopedRuntime&) = delete;
    ScopedRuntime& operator=(const ScopedRuntime&) = delete;
    Runtime* operator->() const noexcept { return runtime_; }
    Runtime& operator*() const noexcept { return *runtime_; }

private:
    Runtime* runtime_;
};

namespace detail {
// Called at the start of Runtime::finalize, while MPI still runs, in the reverse order of registration (upper layers
// free their communicators here). A hook must not call Runtime::init or Runtime::finalize.
void at_runtime_finalize(std::function<void()> hook);
// A section of Runtime::report(); it may run collectives (every rank calls report()).
void at_runtime_report(std::function<std::string()> section);
}  // namespace detail

// MPI datatype for a DType (float16/bfloat16 travel as 16-bit unsigned integers; reductions on them widen to float32).
// Inline, as a switch (the collectives' per-call contract: collectives/communicator_impl.hpp).
[[nodiscard]] inline MPI_Datatype mpi_datatype(DType dtype) noexcept {
    switch (dtype) {
        case DType::Float32:
            return MPI_FLOAT;
        case DType::Float64:
            return MPI_DOUBLE;
        case DType::Float16:
        case DType::BFloat16:
            return MPI_UINT16_T;  // no 16-bit float type in MPI 3.1: they travel as 16-bit integers
        case DType::Int8:
            return MPI_INT8_T;
        case DType::UInt8:
            return MPI_UINT8_T;
        case DType::Int32:
            return MPI_INT32_T;
        case DType::Int64:
            return MPI_INT64_T;
        case DType::Bool:
            return MPI_C_BOOL;
        case DType::Int16:
            return MPI_INT16_T;
        case DType::UInt16:
            return MPI_UINT16_T;
        case DType::UInt32:
            return MPI_UINT32_T;
        case DType::UInt64:
            return MPI_UINT64_T;
        case DType::Complex64:
            return MPI_C_FLOAT_COMPLEX;
        case DType::Complex128:
            return MPI_C_DOUBLE_COMPLEX;
    }
    return MPI_DATATYPE_NULL;
}

// Error text for an MPI error code ("MPI_ERR_TRUNCATE: message truncated").
[[nodiscard]] LOCKSTEP_API std::string mpi_error_string(int code);
// The name of a standard MPI error class ("MPI_ERR_TRUNCATE"), a string of static storage; "MPI error" for any other
// class. Needs no running MPI.
[[nodiscard]] LOCKSTEP_API const char* mpi_error_class_name(int error_class) noexcept;

}  // namespace lockstep
