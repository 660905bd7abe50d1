#include <lockstep/build_config.hpp>
#include <lockstep/system.hpp>

#include <fmt/core.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <string>

#if LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lockstep {

std::optional<KernelVersion> parse_kernel_version(std::string_view release) {
    // major.minor is required; .patch is optional; anything after ("-150-generic", "+") is ignored.
    const char* p = release.data();
    const char* const end = p + release.size();
    auto number = [&](int& out) {
        auto [next, ec] = std::from_chars(p, end, out);
        if (ec != std::errc()) return false;
        p = next;
        return true;
    };
    auto dot = [&] {
        if (p == end || *p != '.') return false;
        ++p;
        return true;
    };
    KernelVersion v;
    if (!number(v.major) || !dot() || !number(v.minor)) return std::nullopt;
    if (dot() && !number(v.patch)) return std::nullopt;
    return v;
}

std::string kernel_release() {
    utsname u{};
    if (::uname(&u) != 0) return "unknown";
    return u.release;
}

std::optional<std::string> kernel_warning(std::string_view release) {
    const auto v = parse_kernel_version(release);
    if (!v || *v >= minimum_recommended_kernel) return std::nullopt;
    return fmt::format(
        "Linux kernel {} is older than {}.{}: processes of a distributed job may hang on it. Upgrade "
        "the kernel to {}.{} or later where you can.",
        release, minimum_recommended_kernel.major, minimum_recommended_kernel.minor, minimum_recommended_kernel.major,
        minimum_recommended_kernel.minor);
}

HostFacts host_facts() {
    HostFacts facts;
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) facts.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
            break;
        }
    }
    if (facts.cpu_model.empty()) facts.cpu_model = "unknown CPU";
    facts.cpu_cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    facts.ram_bytes =
        static_cast<std::size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    struct statvfs shm {};
    if (::statvfs("/dev/shm", &shm) == 0) facts.shm_bytes = static_cast<std::size_t>(shm.f_blocks) * shm.f_frsize;
    return facts;
}

std::optional<CudaDeviceFacts> cuda_device_facts(int index) {
#if LOCKSTEP_HAVE_CUDA
    if (index < 0 || index >= cuda_device_count()) return std::nullopt;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
        (void)cudaGetLastError();
        return std::nullopt;
    }
    return CudaDeviceFacts{prop.name, prop.totalGlobalMem, prop.multiProcessorCount, prop.major, prop.minor};
#else
    (void)index;
    return std::nullopt;
#endif
}

namespace {
[[maybe_unused]] std::string cuda_version_text(int v) {
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}
}  // namespace

std::optional<std::string> cuda_runtime_version() {
#if LOCKSTEP_HAVE_CUDA
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) return std::nullopt;
    return cuda_version_text(v);
#else
    return std::nullopt;
#endif
}

std::optional<std::string> cuda_driver_version() {
#if LOCKSTEP_HAVE_CUDA
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) {
        (void)cudaGetLastError();
        return std::nullopt;
    }
    return cuda_version_text(v);
#else
    return std::nullopt;
#endif
}

}  // namespace lockstep
