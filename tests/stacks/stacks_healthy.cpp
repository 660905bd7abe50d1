// Stacks taken again and again from a healthy job must leave it healthy: every rank computes and makes allreduces
// (checked against their closed-form sums) while a thread of its own asks its watchdog for STACK through the channel,
// as a peer's report would, hundreds of times. Run under mpirun; each rank prints PASS.
//
//   stacks_healthy [N]       N stacks per rank (default 300), each with the main thread's frames.
//   stacks_healthy blocked   the main thread blocks every real-time signal: each answer says the stack could not be
//                            taken (and why) at once, and the job goes on.
#include <collectives/watchdog.hpp>
#include <collectives/watchdog/channel.hpp>
#include <lockstep.hpp>

#include <nlohmann/json.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

namespace {

[[gnu::noinline]] double compute(int step) {
    double acc = 0.0;
    for (int i = 1; i <= 20000; ++i) acc += std::sqrt(static_cast<double>(i + step));
    return acc;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "300";
    const bool blocked = mode == "blocked";
    const int wanted = blocked ? 5 : std::stoi(mode);
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    const int me = comm.rank();
    const int n = comm.size();
    if (blocked) {
        sigset_t all_realtime;
        sigemptyset(&all_realtime);
        for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&all_realtime, sig);
        pthread_sigmask(SIG_BLOCK, &all_realtime, nullptr);
    }
    const lockstep::detail::Endpoint self = lockstep::detail::Watchdog::instance().endpoint();
    std::atomic<bool> asked_all{false};
    std::atomic<int> failures{0};
    std::string first_failure;
    std::thread asker([&] {
        for (int i = 0; i < wanted; ++i) {
            const auto answers =
                lockstep::detail::ask_all({self}, "STACK", lockstep::detail::Clock::now() + std::chrono::seconds(10));
            std::string why;
            if (!answers[0].answer) {
                why = "no answer: " + answers[0].failure;
            } else {
                const auto j = nlohmann::json::parse(*answers[0].answer);
                const auto& native = j.at("native");
                if (blocked) {
                    if (!native.contains("error") ||
                        native["error"].get<std::string>().find("blocks signal") == std::string::npos) {
                        why = "expected an error that names the blocked signal: " + native.dump();
                    }
                } else if (!native.contains("frames") || native["frames"].empty()) {
                    why = "no frames: " + native.dump();
                }
            }
            if (!why.empty() && failures++ == 0) first_failure = why;
        }
        asked_all = true;
    });
    long steps = 0;
    while (true) {
        // [1, rank's computation, whether this rank's asker is done]: sums checked on every rank.
        const double local = compute(static_cast<int>(steps));
        lockstep::Tensor t = lockstep::Tensor::from_data<double>({1.0, local, asked_all ? 1.0 : 0.0}, {3});
        comm.allreduce_(t, lockstep::ReduceOp::Sum);
        const auto sums = t.to_vector<double>();
        if (sums[0] != n || std::abs(sums[1] - n * local) > 1e-6 * std::abs(n * local)) {
            std::printf("FAIL rank %d: wrong sums at step %ld: %g %g\n", me, steps, sums[0], sums[1]);
            return 1;
        }
        if (steps % 16 == 0) ::usleep(200);  // a system call for the signal to interrupt
        ++steps;
        if (sums[2] == n) break;
    }
    asker.join();
    if (failures != 0) {
        std::printf("FAIL rank %d: %d of %d stacks: %s\n", me, failures.load(), wanted, first_failure.c_str());
        return 1;
    }
    std::printf("PASS rank %d: %d stacks taken over %ld steps\n", me, wanted, steps);
    return 0;
}
