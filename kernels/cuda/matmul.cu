// Matrix product on CUDA through cuBLAS, and the cuBLAS status check of cuda_check.hpp.
//
// cuBLAS is column-major; a row-major [r, c] matrix is the column-major [c, r] matrix, its transpose. So the
// row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: B and A swap places, each keeps its
// own transpose flag, and every leading dimension is a row length of the row-major storage.
// float32 and float64 use Sgemm/Dgemm; float16/bfloat16 use GemmEx with float accumulation, rounding once on store.
// One handle per device, created on first use under a mutex and kept until exit, on the legacy default stream that
// the other kernels and the runtime's copies use. (Messages are built without fmt: its compile-time format strings
// do not pass nvcc's front end.)

#include "cuda_kernels.hpp"
#include "device_elements.cuh"

#include <cublas_v2.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace lockstep::detail {

void check_cublas(int status, std::string_view call, std::source_location where) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    const auto s = static_cast<cublasStatus_t>(status);
    throw CudaError(std::string(call), status, std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s),
                    where);
}

}  // namespace lockstep::detail

namespace lockstep::kernels::cuda {

namespace {

struct HandleDeleter {
    void operator()(cublasHandle_t handle) const noexcept { cublasDestroy(handle); }
};
using Handle = std::unique_ptr<cublasContext, HandleDeleter>;

// The handle of the current device (the caller holds a DeviceScope for it).
cublasHandle_t handle_for(int device) {
    static std::mutex mutex;
    static std::map<int, Handle> handles;
    const std::scoped_lock lock(mutex);
    Handle& slot = handles[device];
    if (!slot) {
        cublasHandle_t handle = nullptr;
        LOCKSTEP_CUBLAS_CHECK(cublasCreate(&handle));
        slot.reset(handle);
    }
    return slot.get();
}

[[nodiscard]] int blas_int(std::int64_t value, const Tensor& a, const Tensor& b) {
    if (value > INT_MAX) {
        throw InvalidArgumentError("matmul: dimension " + std::to_string(value) + " of " + a.str() + " @ " + b.str() +
                                   " exceeds cuBLAS's 32-bit limit; split the product into blocks");
    }
    return static_cast<int>(value);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, Tensor& out) {
    const std::int64_t m = out.shape()[0];
    const std::int64_t n = out.shape()[1];
    const std::int64_t k = transpose_a ? a.shape()[0] : a.shape()[1];
    if (m == 0 || n == 0) return;
    const DeviceScope scope(out.device());
    if (k == 0) {
        LOCKSTEP_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, out.nbytes(), nullptr));
        return;
    }
    cublasHandle_t handle = handle_for(out.device().index());
    const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int bm = blas_int(m, a, b);
    const int bn = blas_int(n, a, b);
    const int bk = blas_int(k, a, b);
    const int lda = blas_int(a.shape()[1], a, b);
    const int ldb = blas_int(b.shape()[1], a, b);

    switch (a.dtype()) {
        case DType::Float32: {
            const float alpha = 1.0f;
            const float beta = 0.0f;
            LOCKSTEP_CUBLAS_CHECK(cublasSgemm(handle, op_b, op_a, bn, bm, bk, &alpha, device_data<float>(b), ldb,
                                              device_data<float>(a), lda, &beta, device_data<float>(out), bn));
            return;
        }
        case DType::Float64: {
            const double alpha = 1.0;
            const double beta = 0.0;
            LOCKSTEP_CUBLAS_CHECK(cublasDgemm(handle, op_b, op_a, bn, bm, bk, &alpha, device_data<double>(b), ldb,
                                              device_data<double>(a), lda, &beta, device_data<double>(out), bn));
            return;
        }
        case DType::Float16:
        case DType::BFloat16: {
            const cudaDataType_t type = a.dtype() == DType::Float16 ? CUDA_R_16F : CUDA_R_16BF;
            const float alpha = 1.0f;
            const float beta = 0.0f;
            LOCKSTEP_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, bn, bm, bk, &alpha, b.data(), type, ldb, a.data(),
                                               type, lda, &beta, out.data(), type, bn, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
            return;
        }
        default:
            throw DTypeError("matmul: dtype " + std::string(dtype_name(a.dtype())) +
                             " is not floating; cast to float32 or float64 first");
    }
}

}  // namespace lockstep::kernels::cuda
