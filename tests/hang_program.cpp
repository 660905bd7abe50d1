// A training loop in which the last rank leaves early: it skips the third allreduce and goes on to finalise, while
// the others wait in that allreduce. With a timeout set, lockstep must report the hang and end the job.
#include <lockstep.hpp>

#include <cstdio>

int main() {
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    lockstep::Tensor grad = lockstep::Tensor::ones({16});
    for (int step = 0; step < 3; ++step) {
        if (step == 2 && comm.rank() == comm.size() - 1) break;  // e.g. an early-stopping condition seen by one rank
        comm.allreduce_(grad, lockstep::ReduceOp::Mean);
    }
    std::printf("rank %d left the loop\n", comm.rank());
    std::fflush(stdout);
    return 0;
}
