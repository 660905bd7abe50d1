#include "device_staging.hpp"

#include <lockstep/allocator.hpp>
#include <lockstep/build_config.hpp>
#include <lockstep/communicator.hpp>
#include <lockstep/config.hpp>

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#if LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <lockstep/internal/cuda_check.hpp>
#endif

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace lockstep {

bool mpi_is_cuda_aware() {
    if (const auto forced = config().cuda_aware) return *forced;
    static const bool aware = [] {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
        return MPIX_Query_cuda_support() == 1;
#else
        return false;
#endif
    }();
    return aware;
}

namespace detail {

namespace {

// A pinned host block from the staging allocator, returned when it goes out of scope.
class PinnedBlock {
public:
    explicit PinnedBlock(std::size_t bytes) : ptr_(pinned_allocator().allocate(bytes, &block_)) {}
    ~PinnedBlock() { pinned_allocator().deallocate(ptr_, block_); }
    PinnedBlock(const PinnedBlock&) = delete;
    PinnedBlock& operator=(const PinnedBlock&) = delete;
    [[nodiscard]] void* get() const { return ptr_; }

private:
    std::size_t block_ = 0;
    void* ptr_;
};

bool direct(const Tensor& t) {
    return t.device().is_cpu() || mpi_is_cuda_aware();
}

#if LOCKSTEP_HAVE_CUDA
// The tensor's device made current for the scope (streams and events belong to the current device).
class OnDevice {
public:
    explicit OnDevice(const Tensor& t) {
        LOCKSTEP_CUDA_CHECK(cudaGetDevice(&previous_));
        if (previous_ != t.device().index()) LOCKSTEP_CUDA_CHECK(cudaSetDevice(t.device().index()));
    }
    ~OnDevice() { cudaSetDevice(previous_); }
    OnDevice(const OnDevice&) = delete;
    OnDevice& operator=(const OnDevice&) = delete;

private:
    int previous_ = 0;
};
#endif

// A CUDA-aware MPI reads and writes device memory on streams of its own: the work already queued on the tensor's
// device's legacy default stream (the kernels and copies that produced it) must be finished before MPI sees it.
void settle_for_direct_use(const Tensor& t) {
#if LOCKSTEP_HAVE_CUDA
    if (t.device().is_cuda() && t.numel() > 0) {
        const OnDevice scope(t);
        LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    }
#else
    (void)t;
#endif
}

}  // namespace

Tensor nonblocking_buffer(const Tensor& t, Direction direction) {
    if (direct(t)) {
        settle_for_direct_use(t);
        return t;
    }
    Tensor host = Tensor::empty(t.shape(), t.dtype());
    if (direction != Direction::Out && t.numel() > 0) t.copy_to_host(host.data());
    return host;
}

void copy_back_received(const Tensor& buffer, Tensor& t) {
    if (buffer.data() != t.data() && t.numel() > 0) t.copy_from_host(buffer.data());
}

std::int64_t staging_chunk_elements(DType dtype) {
    return static_cast<std::int64_t>(config().staging_chunk_bytes / dtype_size(dtype));
}

void with_host_buffer_general(Tensor& t, Direction direction, const std::function<void(void*)>& fn) {
    if (direct(t)) {
        settle_for_direct_use(t);
        fn(t.numel() == 0 ? nullptr : t.data());
        return;
    }
    PinnedBlock host(t.nbytes());
    if (direction != Direction::Out) t.copy_to_host(host.get());
    fn(host.get());
    if (direction != Direction::In) t.copy_from_host(host.get());
}

void with_host_buffers_general(const Tensor& in, Tensor& out, const std::function<void(const void*, void*)>& fn,
                               bool copy_back) {
    if (direct(in) && direct(out)) {
        settle_for_direct_use(in);
        settle_for_direct_use(out);
        fn(in.numel() == 0 ? nullptr : in.data(), out.numel() == 0 ? nullptr : out.data());
        return;
    }
    std::unique_ptr<PinnedBlock> in_stage, out_stage;
    const void* src = in.data();
    void* dst = out.data();
    if (!direct(in)) {
        in_stage = std::make_unique<PinnedBlock>(in.nbytes());
        in.copy_to_host(in_stage->get());
        src = in_stage->get();
    }
    if (!direct(out)) {
        out_stage = std::make_unique<PinnedBlock>(out.nbytes());
        dst = out_stage->get();
    }
    fn(src, dst);
    if (out_stage && copy_back) out.copy_from_host(out_stage->get());
}

void with_host_chunks_general(Tensor& t, const std::function<void(void*, std::int64_t)>& fn) {
    const std::int64_t chunk = staging_chunk_elements(t.dtype());
    if (direct(t) || t.numel() <= chunk) {
        with_host_buffer(t, Direction::InOut, [&](void* p) { fn(p, t.numel()); });
        return;
    }
#if LOCKSTEP_HAVE_CUDA
    // Two pinned buffers, one stream: D2H(i+1) runs while MPI works on chunk i; H2D(i) is queued behind it, and the
    // stream's order guarantees buffer i % 2 is back on the device before D2H(i+2) overwrites it.
    const std::size_t elem = dtype_size(t.dtype());
    const std::size_t chunk_bytes = static_cast<std::size_t>(chunk) * elem;
    PinnedBlock buffers[2] = {PinnedBlock(chunk_bytes), PinnedBlock(chunk_bytes)};
    const OnDevice scope(t);
    cudaStream_t stream = nullptr;
    LOCKSTEP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t ready[2] = {nullptr, nullptr};
    struct Cleanup {
        cudaStream_t& s;
        cudaEvent_t (&e)[2];
        ~Cleanup() {
            for (auto ev : e) {
                if (ev != nullptr) cudaEventDestroy(ev);
            }
            if (s != nullptr) {
                cudaStreamSynchronize(s);
                cudaStreamDestroy(s);
            }
        }
    } cleanup{stream, ready};
    for (auto& ev : ready) LOCKSTEP_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    // The stream is non-blocking, so nothing orders it after the work that wrote the tensor: kernels and copies on the
    // legacy default stream (a cudaMemcpy from pageable memory may return before its DMA has landed). It waits for
    // that stream first; work on the caller's other streams is the caller's to finish (or to name in the call).
    LOCKSTEP_CUDA_CHECK(cudaEventRecord(ready[0], cudaStreamLegacy));
    LOCKSTEP_CUDA_CHECK(cudaStreamWaitEvent(stream, ready[0], 0));

    auto* device = static_cast<char*>(t.data());
    const std::int64_t n = t.numel();
    const std::int64_t chunks = (n + chunk - 1) / chunk;
    auto count_of = [&](std::int64_t i) { return std::min(chunk, n - i * chunk); };
    auto fetch = [&](std::int64_t i) {
        void* host = buffers[i % 2].get();
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(host, device + static_cast<std::size_t>(i * chunk) * elem,
                                            static_cast<std::size_t>(count_of(i)) * elem, cudaMemcpyDeviceToHost,
                                            stream));
        LOCKSTEP_CUDA_CHECK(cudaEventRecord(ready[i % 2], stream));
    };
    fetch(0);
    for (std::int64_t i = 0; i < chunks; ++i) {
        if (i + 1 < chunks) fetch(i + 1);
        LOCKSTEP_CUDA_CHECK(cudaEventSynchronize(ready[i % 2]));
        void* host = buffers[i % 2].get();
        fn(host, count_of(i));
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(device + static_cast<std::size_t>(i * chunk) * elem, host,
                                            static_cast<std::size_t>(count_of(i)) * elem, cudaMemcpyHostToDevice,
                                            stream));
    }
    LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream));
#else
    with_host_buffer(t, Direction::InOut, [&](void* p) { fn(p, t.numel()); });
#endif
}

}  // namespace detail
}  // namespace lockstep
