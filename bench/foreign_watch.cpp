// The per-call cost of the watchdog's board for calls lockstep does not carry (lockstep/foreign_watch.hpp): what an
// MPI interposition library adds to every call with the checks off. Times begin+end pairs against an empty loop, in
// one process (no MPI: the boards are the process's own), as nanoseconds of the thread's CPU time per pair, the best of
// several rounds.
//
//   bench_foreign_watch [--pairs N] [--rounds R]

#include <lockstep/foreign_watch.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

namespace foreign = lockstep::foreign;

namespace {

// This thread's CPU time in nanoseconds: on a shared machine, wall time would count the time slices of others.
double thread_ns() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Best time per iteration over the rounds, in nanoseconds of this thread's CPU time.
template <typename Body>
double best_ns(long pairs, int rounds, Body&& body) {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        const double start = thread_ns();
        for (long i = 0; i < pairs; ++i) body(i);
        best = std::min(best, (thread_ns() - start) / static_cast<double>(pairs));
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app("The per-call cost of the watchdog's board for calls lockstep does not carry");
    long pairs = 2'000'000;
    int rounds = 7;
    app.add_option("--pairs", pairs, "begin/end pairs per round")->check(CLI::PositiveNumber);
    app.add_option("--rounds", rounds, "rounds (the best is shown)")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);

    foreign::start(0);
    const std::vector<foreign::EndpointBytes> self = {foreign::endpoint()};
    foreign::Watched* watched = foreign::watch(self, {.timeout = 600.0, .name = "bench"});
    foreign::Watched* shared = foreign::watch(self, {.timeout = 600.0, .threads_share_point_to_point = true});
    foreign::Watched* off = foreign::watch(self, {.timeout = 0.0});

    // What an interposition library passes: static strings, the caller's address, the arguments.
    const auto call = [](long i) {
        return foreign::Call{
            .name = "MPI_Allreduce", .count = i, .datatype = "MPI_INT", .caller = __builtin_return_address(0)};
    };
    const auto recv = [](long i) {
        return foreign::Call{.name = "MPI_Recv",
                             .direction = foreign::Direction::receive,
                             .peer = 1,
                             .tag = static_cast<int>(i & 0xff),
                             .count = i,
                             .datatype = "MPI_INT",
                             .caller = __builtin_return_address(0)};
    };
    volatile long sink = 0;
    const double empty = best_ns(pairs, rounds, [&](long i) { sink = sink + call(i).count; });
    const double collective = best_ns(pairs, rounds, [&](long i) {
        foreign::begin_collective(watched, call(i));
        foreign::end_collective(watched);
    });
    const double point_to_point = best_ns(pairs, rounds, [&](long i) {
        foreign::begin_point_to_point(watched, recv(i));
        foreign::end_point_to_point(watched);
    });
    const double threads = best_ns(pairs, rounds, [&](long i) {
        foreign::begin_point_to_point(shared, recv(i));
        foreign::end_point_to_point(shared);
    });
    const double timeout_off = best_ns(pairs, rounds, [&](long i) {
        foreign::begin_collective(off, call(i));
        foreign::end_collective(off);
    });
    std::printf("per begin+end pair, best of %d rounds of %ld (ns; the empty loop subtracted)\n", rounds, pairs);
    std::printf("%-48s %8.1f\n", "empty loop (not subtracted)", empty);
    std::printf("%-48s %8.1f\n", "collective", collective - empty);
    std::printf("%-48s %8.1f\n", "point-to-point, one thread", point_to_point - empty);
    std::printf("%-48s %8.1f\n", "point-to-point, threads share it (mutex)", threads - empty);
    std::printf("%-48s %8.1f\n", "timeout 0 (not watched)", timeout_off - empty);
    foreign::forget(off);
    foreign::forget(shared);
    foreign::forget(watched);
    return 0;
}
