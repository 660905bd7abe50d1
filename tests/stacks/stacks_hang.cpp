// A job that hangs while one rank computes: every rank but the last waits in an allreduce, and the last loops in
// spin_in_computation(), so the hang report's stacks must name that function and its line, and put the waiting
// ranks together in the allreduce. Run by stacks_test.py with a short timeout.
//
//   stacks_hang [spin]   the last rank computes.
//   stacks_hang blocked  the same, with the last rank's thread blocking every real-time signal first: its stack
//                        cannot be taken, the report says so, and the job still ends.
#include <lockstep.hpp>

#include <pthread.h>
#include <signal.h>

#include <string>

namespace {

// Never returns: the watchdog ends the job.
[[gnu::noinline]] void spin_in_computation(double seed) {
    volatile double acc = seed;
    while (true) acc = acc * 0.999999 + 1e-9;  // spins here
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "spin";
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    lockstep::Tensor grad = lockstep::Tensor::ones({16});
    comm.allreduce_(grad, lockstep::ReduceOp::Sum);
    if (comm.rank() == comm.size() - 1) {
        if (mode == "blocked") {
            sigset_t all_realtime;
            sigemptyset(&all_realtime);
            for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&all_realtime, sig);
            pthread_sigmask(SIG_BLOCK, &all_realtime, nullptr);
        }
        spin_in_computation(1.0);
    }
    comm.allreduce_(grad, lockstep::ReduceOp::Sum);  // waits here
    return 0;
}
