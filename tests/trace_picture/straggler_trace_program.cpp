// Run under mpirun: every rank computes, then allreduces, for a number of steps; the last rank computes longer, so
// the others wait for it in every allreduce. Then straggler_report(world, FILE) writes the whole run's trace file.
// straggler_trace_test.py checks the file and draws it.
//
// Usage: straggler_trace_program FILE [STEPS] [EXTRA_MS]
#include <lockstep.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s FILE [STEPS] [EXTRA_MS]\n", argv[0]);
        return 2;
    }
    const int steps = argc > 2 ? std::stoi(argv[2]) : 20;
    const int extra_ms = argc > 3 ? std::stoi(argv[3]) : 50;
    lockstep::Runtime::init();
    {
        lockstep::Communicator& world = lockstep::Communicator::world();
        const bool slow = world.rank() == world.size() - 1;
        lockstep::Tensor gradient = lockstep::Tensor::ones({256});
        for (int step = 0; step < steps; ++step) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2 + (slow ? extra_ms : 0)));
            (void)world.allreduce(gradient);
        }
        const std::string report = lockstep::straggler_report(world, argv[1]);
        if (world.rank() == 0) std::printf("%s", report.c_str());
    }
    lockstep::Runtime::finalize();
    return 0;
}
