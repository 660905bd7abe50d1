#pragma once
// Checking of CUDA runtime and cuBLAS return codes. Internal to the library but shared by its layers (runtime defines
// the checks, kernels and collectives call them), hence its own include root; included only where LOCKSTEP_HAVE_CUDA.

#include <lockstep/errors.hpp>

#include <cuda_runtime_api.h>

#include <source_location>
#include <string_view>

namespace lockstep::detail {

// Throws CudaError naming the call, the code's name and text, and the position, unless rc == cudaSuccess.
void check_cuda(cudaError_t rc, std::string_view call, std::source_location where = std::source_location::current());
// Throws CudaError for a cuBLAS status other than CUBLAS_STATUS_SUCCESS (0).
void check_cublas(int status, std::string_view call, std::source_location where = std::source_location::current());
// After a kernel launch: checks cudaGetLastError() (launch configuration errors) and names the kernel.
void check_cuda_launch(std::string_view kernel, std::source_location where = std::source_location::current());

}  // namespace lockstep::detail

#define LOCKSTEP_CUDA_CHECK(call) ::lockstep::detail::check_cuda((call), #call)
#define LOCKSTEP_CUBLAS_CHECK(call) ::lockstep::detail::check_cublas(static_cast<int>(call), #call)
#define LOCKSTEP_CUDA_LAUNCH_CHECK(kernel) ::lockstep::detail::check_cuda_launch(kernel)
