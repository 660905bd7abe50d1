// A job that hangs while one rank computes: every rank but the last waits in an allreduce, and the last loops in
// spin_in_computation(), so the hang report's stacks must name that function and its line, and put the waiting
// ranks together in the allreduce. Run by stacks_test.py with a short timeout.
//
//   stacks_hang [spin]   the last rank computes.
//   stacks_hang blocked  the same, with the last rank's thread blocking every real-time signal first: its stack
//                        cannot be taken, the report says so, and the job still ends.
//   stacks_hang sleep    the last rank sleeps in nanosleep() instead, and prints "the program's sleep returned
//                        early" each time it returns before its time (the signal that takes native stacks ends it).
#include <lockstep.hpp>

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace {

// Never returns: the watchdog ends the job.
[[gnu::noinline]] void spin_in_computation(double seed) {
    volatile double acc = seed;
    while (true) acc = acc * 0.999999 + 1e-9;  // spins here
}

// Never returns: the watchdog ends the job.
[[noreturn]] void sleep_in_program() {
    while (true) {
        timespec minute{60, 0};
        if (::nanosleep(&minute, nullptr) != 0 && errno == EINTR) {
            std::printf("the program's sleep returned early\n");
            std::fflush(stdout);
        }
    }
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
        if (mode == "sleep") sleep_in_program();
        spin_in_computation(1.0);
    }
    comm.allreduce_(grad, lockstep::ReduceOp::Sum);  // waits here
    return 0;
}
