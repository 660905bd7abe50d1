#pragma once
// What the dispatch point tells a backend (cpu/, cuda/) besides the tensors: which arithmetic or reduction to run and,
// for reductions, the geometry. Plain C++ so that both g++ and nvcc include it.

#include <cstdint>

namespace lockstep::kernels {

enum class BinaryOp : unsigned char { Add, Sub, Mul, Div };
// A tensor reduction of the kernels (sum, mean, max, min over elements); not the collectives' lockstep::ReduceOp.
enum class Reduction : unsigned char { Sum, Mean, Max, Min };

// A reduction reads its input as [outer, extent, inner] (row-major) and writes [outer, inner], combining the `extent`
// elements of each (outer, inner) pair. A whole-tensor reduction is [1, numel, 1].
struct ReduceGeometry {
    std::int64_t outer = 1;
    std::int64_t extent = 0;
    std::int64_t inner = 1;
};

}  // namespace lockstep::kernels
