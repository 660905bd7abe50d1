// Device memory: the caching cudaMalloc allocator per device, pinned host memory for staging, copies between devices,
// and the CUDA error checks. Without CUDA, CUDA devices are a DeviceError and "pinned" memory is ordinary host memory.

#include <lockstep/allocator.hpp>
#include <lockstep/build_config.hpp>
#include <lockstep/device.hpp>
#include <lockstep/tensor.hpp>

#include <fmt/core.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#if LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <lockstep/internal/cuda_check.hpp>
#endif

namespace lockstep {

namespace {

// Host memory that is not page-locked: the pinned allocator's stand-in where no CUDA driver is present.
class PageableHostAllocator final : public Allocator {
public:
    PageableHostAllocator() : Allocator(Device::cpu()) {}
    ~PageableHostAllocator() override { release_all_cached(); }

protected:
    void* system_allocate(std::size_t bytes) override { return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096); }
    void system_free(void* ptr, std::size_t) noexcept override { std::free(ptr); }
};

#if LOCKSTEP_HAVE_CUDA

// Makes `device` current for the scope and restores the previous device.
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        LOCKSTEP_CUDA_CHECK(cudaGetDevice(&previous_));
        if (previous_ != device) LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
    }
    ~DeviceGuard() { cudaSetDevice(previous_); }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = 0;
};

class CudaAllocator final : public Allocator {
public:
    explicit CudaAllocator(int index) : Allocator(Device::cuda(index)) {}
    ~CudaAllocator() override { release_all_cached(); }

protected:
    void* system_allocate(std::size_t bytes) override {
        DeviceGuard guard(device().index());
        void* ptr = nullptr;
        const cudaError_t rc = cudaMalloc(&ptr, bytes);
        if (rc == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();  // clear the sticky-free error so later calls do not report it
            return nullptr;
        }
        LOCKSTEP_CUDA_CHECK(rc);
        return ptr;
    }
    void system_free(void* ptr, std::size_t) noexcept override {
        int previous = 0;
        if (cudaGetDevice(&previous) != cudaSuccess) return;
        cudaSetDevice(device().index());
        cudaFree(ptr);
        cudaSetDevice(previous);
    }
};

class PinnedHostAllocator final : public Allocator {
public:
    PinnedHostAllocator() : Allocator(Device::cpu()) {}
    ~PinnedHostAllocator() override { release_all_cached(); }

protected:
    void* system_allocate(std::size_t bytes) override {
        void* ptr = nullptr;
        const cudaError_t rc = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
        if (rc == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            return nullptr;
        }
        LOCKSTEP_CUDA_CHECK(rc);
        return ptr;
    }
    void system_free(void* ptr, std::size_t) noexcept override { cudaFreeHost(ptr); }
};

#endif  // LOCKSTEP_HAVE_CUDA

}  // namespace

int cuda_device_count() {
#if LOCKSTEP_HAVE_CUDA
    static const int count = [] {
        int n = 0;
        // No driver, or a driver without devices, means zero devices, not an error: the CPU path still works.
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        return n;
    }();
    return count;
#else
    return 0;
#endif
}

namespace detail {

Allocator& cuda_allocator(int index) {
#if LOCKSTEP_HAVE_CUDA
    const int count = cuda_device_count();
    if (index < 0 || index >= count) {
        throw DeviceError(fmt::format("device cuda:{} does not exist: this process sees {} CUDA device(s){}", index,
                                      count, count == 0 ? " (no driver or no GPU)" : ""));
    }
    static std::mutex mutex;
    static std::vector<std::unique_ptr<CudaAllocator>> allocators(static_cast<std::size_t>(count));
    std::scoped_lock lock(mutex);
    auto& slot = allocators[static_cast<std::size_t>(index)];
    if (!slot) slot = std::make_unique<CudaAllocator>(index);
    return *slot;
#else
    throw DeviceError(
        fmt::format("device cuda:{} is not available: this build of lockstep has CUDA disabled; "
                    "rebuild with `meson setup -Dcuda=enabled` on a machine with the CUDA toolkit",
                    index));
#endif
}

Allocator& pinned_host_allocator() {
#if LOCKSTEP_HAVE_CUDA
    if (cuda_device_count() > 0) {
        static PinnedHostAllocator pinned;
        return pinned;
    }
#endif
    static PageableHostAllocator pageable;
    return pageable;
}

#if LOCKSTEP_HAVE_CUDA
void check_cuda(cudaError_t rc, std::string_view call, std::source_location where) {
    if (rc != cudaSuccess) {
        throw CudaError(std::string(call), static_cast<int>(rc),
                        fmt::format("{}: {}", cudaGetErrorName(rc), cudaGetErrorString(rc)), where);
    }
}

void check_cuda_launch(std::string_view kernel, std::source_location where) {
    const cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) {
        throw CudaError(fmt::format("launch of kernel {}", kernel), static_cast<int>(rc),
                        fmt::format("{}: {}", cudaGetErrorName(rc), cudaGetErrorString(rc)), where);
    }
}
#endif

}  // namespace detail

void empty_all_caches() {
    allocator_for(Device::cpu()).empty_cache();
    pinned_allocator().empty_cache();
    for (int i = 0; i < cuda_device_count(); ++i) allocator_for(Device::cuda(i)).empty_cache();
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
    if (bytes == 0) return;
    if (dst_device.is_cpu() && src_device.is_cpu()) {
        std::memmove(dst, src, bytes);  // views of one storage may overlap
        return;
    }
#if LOCKSTEP_HAVE_CUDA
    // Unified addressing lets the runtime infer the direction, also between two devices.
    LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
#else
    const Device cuda = dst_device.is_cuda() ? dst_device : src_device;
    (void)detail::cuda_allocator(cuda.index());  // throws the DeviceError that explains the build
#endif
}

}  // namespace lockstep

namespace lockstep::detail {
void set_current_cuda_device(int index) {
#if LOCKSTEP_HAVE_CUDA
    LOCKSTEP_CUDA_CHECK(cudaSetDevice(index));
#else
    (void)cuda_allocator(index);
#endif
}
}  // namespace lockstep::detail
