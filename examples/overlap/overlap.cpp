// Overlapping communication with computation: the gradient of each layer is summed across ranks while the
// "backward pass" of the next layer is computed, as data-parallel training does with its gradient buckets.
//
//   mpirun -n 2 build/examples/overlap/lockstep_overlap
//
// Each layer's allreduce is issued as soon as its gradient exists (iallreduce_ returns at once); the progress
// thread runs it while the loop computes the next gradient; the step waits for them all before the update.
#include <lockstep.hpp>

#include <cstdio>
#include <vector>

int main() {
    lockstep::ScopedRuntime runtime;
    auto& comm = lockstep::Communicator::world();
    const int layers = 4;
    std::vector<lockstep::Tensor> grads;
    std::vector<lockstep::Work> pending;
    for (int layer = layers - 1; layer >= 0; --layer) {  // backward: the last layer's gradient comes first
        // This layer's "gradient": its number plus the rank, over 1 Mi elements.
        lockstep::Tensor g = lockstep::Tensor::full({1 << 20}, layer + comm.rank());
        grads.push_back(g);
        pending.push_back(comm.iallreduce_(grads.back(), lockstep::ReduceOp::Mean));  // runs while we go on
    }
    for (lockstep::Work& w : pending) w.wait();  // every gradient averaged before the optimizer step
    // Layer l's mean over ranks 0..n-1 is l + (n - 1) / 2.
    for (int i = 0; i < layers; ++i) {
        const int layer = layers - 1 - i;
        const double mean = lockstep::ops::cast(grads[static_cast<std::size_t>(i)], lockstep::DType::Float64)
                                .to_vector<double>()
                                .front();
        std::printf("process %d: layer %d gradient mean %.1f\n", comm.rank(), layer, mean);
    }
    return 0;
}
