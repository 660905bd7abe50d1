#pragma once
// Memory that MPI can read and write for a tensor (internal).
//
// Host tensors are passed as they are. CUDA tensors are passed as device pointers when MPI is CUDA-aware, and
// otherwise staged through pinned host buffers. Elementwise collectives (allreduce, broadcast) stage in chunks
// through two pinned buffers on one CUDA stream, so that the copy of chunk i+1 to the host and of chunk i-1 back to
// the device overlap the MPI call on chunk i. Either way the bytes MPI sees are the same, so results are identical.

#include <lockstep/tensor.hpp>

#include <cstdint>
#include <functional>

namespace lockstep::detail {

enum class Direction { In, Out, InOut };

// The general forms, which stage CUDA tensors when MPI is not CUDA-aware (device_staging.cpp).
void with_host_buffer_general(Tensor& t, Direction direction, const std::function<void(void*)>& fn);
void with_host_buffers_general(const Tensor& in, Tensor& out, const std::function<void(const void*, void*)>& fn,
                               bool copy_back);
void with_host_chunks_general(Tensor& t, const std::function<void(void*, std::int64_t)>& fn);

// The wrappers below call fn directly for host tensors, building no std::function (the per-call contract:
// communicator_impl.hpp). Other tensors take the general forms.

// fn(pointer) with the tensor's elements readable (In), writable (Out) or both.
template <typename Fn>
void with_host_buffer(Tensor& t, Direction direction, Fn&& fn) {
    if (t.device().is_cpu()) {
        fn(t.numel() == 0 ? nullptr : t.data());
        return;
    }
    with_host_buffer_general(t, direction, [&fn](void* p) { fn(p); });
}

// fn(src, dst) with `in` readable and `out` writable; `out` is copied back only if copy_back.
template <typename Fn>
void with_host_buffers(const Tensor& in, Tensor& out, Fn&& fn, bool copy_back = true) {
    if (in.device().is_cpu() && out.device().is_cpu()) {
        fn(in.numel() == 0 ? nullptr : in.data(), out.numel() == 0 ? nullptr : out.data());
        return;
    }
    with_host_buffers_general(
        in, out, [&fn](const void* src, void* dst) { fn(src, dst); }, copy_back);
}

// fn(pointer, count) once per chunk of t, in order, with each chunk readable and writable. Host tensors and
// CUDA-aware MPI: a single call over the whole tensor.
template <typename Fn>
void with_host_chunks(Tensor& t, Fn&& fn) {
    if (t.device().is_cpu()) {
        fn(t.numel() == 0 ? nullptr : t.data(), t.numel());
        return;
    }
    with_host_chunks_general(t, [&fn](void* p, std::int64_t count) { fn(p, count); });
}

// The memory a non-blocking send or receive hands MPI until it completes: the tensor itself for a host tensor or under
// CUDA-aware MPI (the device's pending work finished first), otherwise a host copy, filled from t for a send. After a
// receive into a copy, copy_back_received copies it into t.
[[nodiscard]] Tensor nonblocking_buffer(const Tensor& t, Direction direction);
void copy_back_received(const Tensor& buffer, Tensor& t);

// Elements per staging chunk (4 MiB of data; LOCKSTEP_STAGING_CHUNK_BYTES overrides).
[[nodiscard]] std::int64_t staging_chunk_elements(DType dtype);

}  // namespace lockstep::detail
