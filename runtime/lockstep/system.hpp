#pragma once
// Facts about the machine a process runs on: the Linux kernel version, the CPU and memory, the CUDA devices.

#include <lockstep/device.hpp>
#include <lockstep/export.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

struct KernelVersion {
    int major = 0;
    int minor = 0;
    int patch = 0;
    friend auto operator<=>(const KernelVersion&, const KernelVersion&) = default;
};

// Parses a release string as uname -r prints it: "5.4.0-150-generic", "6.1.0-18-amd64", "4.4.0". nullopt when it
// does not start with major.minor.
[[nodiscard]] LOCKSTEP_API std::optional<KernelVersion> parse_kernel_version(std::string_view release);
// The running kernel's release string (uname -r).
[[nodiscard]] LOCKSTEP_API std::string kernel_release();
// Kernels older than 5.5 are known to make multi-process jobs hang (the warning the start-up checks give).
inline constexpr KernelVersion minimum_recommended_kernel{5, 5, 0};
// The warning for a release string, or nullopt when the kernel is recent enough or the string unparsable.
[[nodiscard]] LOCKSTEP_API std::optional<std::string> kernel_warning(std::string_view release);

struct HostFacts {
    std::string cpu_model;  // /proc/cpuinfo "model name"
    int cpu_cores = 0;      // online logical CPUs
    std::size_t ram_bytes = 0;
    std::size_t shm_bytes = 0;  // size of /dev/shm
};
[[nodiscard]] LOCKSTEP_API HostFacts host_facts();

struct CudaDeviceFacts {
    std::string name;
    std::size_t memory_bytes = 0;
    int multiprocessors = 0;
    int compute_major = 0;
    int compute_minor = 0;
};
// Properties of CUDA device `index`; nullopt without CUDA or for a device that does not exist.
[[nodiscard]] LOCKSTEP_API std::optional<CudaDeviceFacts> cuda_device_facts(int index);
// CUDA runtime and driver versions as "12.4", or nullopt without CUDA (driver: also without a driver).
[[nodiscard]] LOCKSTEP_API std::optional<std::string> cuda_runtime_version();
[[nodiscard]] LOCKSTEP_API std::optional<std::string> cuda_driver_version();

}  // namespace lockstep
