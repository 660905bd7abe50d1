// The lockstep demo: every rank builds tensors, computes with the kernels, and the ranks allreduce the result.
// Run it with: mpirun -n 2 build/examples/demo/lockstep_demo
//
// Each rank r computes y = relu(x_r @ W) with x_r = (r + 1) * arange(8) as [2, 4] and W = ones[4, 3], so the sum of
// y on rank r is 84 (r + 1) and the allreduced sum over n ranks is 84 n (n + 1) / 2: the program checks that value.

#include <lockstep.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

// Prints one line per rank on rank 0, in rank order (gathered, so the launcher cannot interleave them).
void print_in_rank_order(const lockstep::Runtime& rt, const std::string& line) {
    const auto& id = rt.identity();
    int length = static_cast<int>(line.size());
    std::vector<int> lengths(static_cast<std::size_t>(id.size));
    LOCKSTEP_MPI_CHECK(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, rt.comm()));
    std::vector<int> offsets(lengths.size(), 0);
    int total = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        offsets[i] = total;
        total += lengths[i];
    }
    std::string all(static_cast<std::size_t>(id.is_main_process() ? total : 0), '\0');
    LOCKSTEP_MPI_CHECK(
        MPI_Gatherv(line.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, rt.comm()));
    if (id.is_main_process()) {
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            std::fwrite(all.data() + offsets[i], 1, static_cast<std::size_t>(lengths[i]), stdout);
        }
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    // No options: --help says so, anything else is a usage error (exit 2), as for every lockstep program.
    if (argc > 1) {
        const std::string arg = argv[1];
        if (arg == "-h" || arg == "--help") {
            std::printf(
                "Usage: mpirun -n N lockstep_demo\n\nEvery rank computes relu(x @ W) with the kernels and the "
                "ranks allreduce the sum; exit 0 when it equals the closed form, 1 otherwise.\n");
            return 0;
        }
        std::fprintf(stderr, "lockstep_demo: takes no arguments (got '%s'); see --help\n", arg.c_str());
        return 2;
    }
    try {
        lockstep::ScopedRuntime rt;
        const auto& id = rt->identity();
        const lockstep::Device device = rt->device();

        using lockstep::Tensor;
        Tensor x = lockstep::ops::mul(Tensor::arange(0, 8, 1, lockstep::DType::Float32, device), id.rank + 1.0)
                       .reshape({2, 4});
        Tensor w = Tensor::ones({4, 3}, lockstep::DType::Float32, device);
        Tensor y = lockstep::ops::relu(lockstep::ops::matmul(x, w));
        Tensor local = lockstep::ops::sum(y).to(lockstep::Device::cpu());

        Tensor global = lockstep::Communicator::world().allreduce(local, lockstep::ReduceOp::Sum);

        print_in_rank_order(*rt, fmt::format("rank {}/{} (local {}/{}, node {}/{}) on {} using {}: y = relu(x @ W) is "
                                             "{}, sum(y) = {:g}\n",
                                             id.rank, id.size, id.local_rank, id.local_size, id.node_index,
                                             id.node_count, id.hostname, device.str(), y.str(), local.item<double>()));

        const double expected = 84.0 * id.size * (id.size + 1) / 2.0;
        const double got = global.item<double>();
        if (id.is_main_process()) {
            std::printf("allreduce(sum(y)) over %d ranks = %g (expected %g): %s\n", id.size, got, expected,
                        got == expected ? "ok" : "MISMATCH");
            const auto stats = lockstep::allocator_for(lockstep::Device::cpu()).stats();
            std::printf("host allocator: %llu allocations, %llu from cache, peak %s\n",
                        static_cast<unsigned long long>(stats.num_allocations),
                        static_cast<unsigned long long>(stats.cache_hits),
                        lockstep::format_bytes(stats.peak_bytes).c_str());
        }
        return got == expected ? 0 : 1;
    } catch (const lockstep::Error& e) {
        std::fprintf(stderr, "lockstep demo failed: %s\n", e.what());
        return 1;
    }
}
