// Calls lockstep does not carry, on the watchdog's boards through lockstep/foreign_watch.hpp alone, as an MPI
// interposition library puts them there: the endpoints exchanged with plain MPI, then begin/end around planted calls
// that never complete. Run by timeout_job.py under mpirun.
//
//   raise (3 ranks): ranks 0-1 in `MPI_Allreduce` #2, rank 2 never arrives (in MPI_Finalize): the communicator's
//     on_timeout action gets the report on ranks 0 and 1, which check its text here and print PASS; exit 0.
//   skip (3 ranks): the same hang without an action: the job ends with exit code 124 and the report.
//   recv (2 ranks): rank 1 in `MPI_Recv` from process 0 (tag 7), rank 0 in `MPI_Send` to process 1 (tag 8): the
//     report of the stuck receive names the peer's send with the other tag; the job ends with exit code 124.
//   wait (2 ranks): rank 0 waits for an `MPI_Irecv` from process 1 that rank 1 never matches (it is in a barrier):
//     the job ends with exit code 124.

#include <lockstep/foreign_watch.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace foreign = lockstep::foreign;

namespace {

int rank = 0;
int size = 0;

// The caller's return address, as an interposition library records it.
[[gnu::noinline]] const void* here() {
    return __builtin_return_address(0);
}

// Waits past any timeout of these tests: the watchdog ends the job first (or the test's limit does).
[[noreturn]] void stay() {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "rank %d: the job did not end\n", rank);
    std::exit(3);
}

foreign::Watched* watch_world(double timeout, std::function<void(const std::string&)> on_timeout = {}) {
    const foreign::EndpointBytes mine = foreign::endpoint();
    std::vector<foreign::EndpointBytes> all(static_cast<std::size_t>(size));
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), static_cast<int>(mine.size()),
                  MPI_BYTE, MPI_COMM_WORLD);
    return foreign::watch(all, {.timeout = timeout, .name = "MPI_COMM_WORLD", .on_timeout = std::move(on_timeout)});
}

foreign::Call allreduce(const void* caller) {
    return {.name = "MPI_Allreduce", .count = 4, .datatype = "MPI_INT", .caller = caller};
}

int failures = 0;
void expect(const std::string& report, const std::string& text) {
    if (report.find(text) == std::string::npos) {
        std::fprintf(stderr, "rank %d: FAIL: the report lacks \"%s\"\n", rank, text.c_str());
        ++failures;
    }
}

// Ranks 0-1 complete allreduce #1 with rank 2, then wait in #2 while rank 2 is in MPI_Finalize.
void skip(foreign::Watched* world) {
    foreign::begin_collective(world, allreduce(here()));
    foreign::end_collective(world);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) {
        foreign::set_phase("in MPI_Finalize", here());
        return;
    }
    // Rank 1 calls from a known place (a Python line), rank 0 from its return address.
    foreign::Call call = allreduce(here());
    if (rank == 1) {
        call.file = "train.py";
        call.line = 42;
    }
    foreign::begin_collective(world, call);
}

int run_raise() {
    std::promise<std::string> reported;
    auto report = reported.get_future();
    foreign::Watched* world = watch_world(2.0, [&](const std::string& text) { reported.set_value(text); });
    // The ranks that wait, apart: each builds its report while the other still waits.
    MPI_Comm waiting = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank == size - 1 ? MPI_UNDEFINED : 0, rank, &waiting);
    skip(world);
    if (rank != size - 1) {
        if (report.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
            std::fprintf(stderr, "rank %d: FAIL: no report within 30 s\n", rank);
            return 1;
        }
        const std::string text = report.get();
        std::printf("rank %d got the report:\n%s\n", rank, text.c_str());
        MPI_Barrier(waiting);
        MPI_Comm_free(&waiting);
        expect(text, "collective timed out after");
        expect(text, "Operation: `MPI_Allreduce` #2 (4 x MPI_INT) on MPI_COMM_WORLD (3 processes), called at ");
        expect(text, "Arrived and waiting: Processes 0-1\n");
        expect(text, "Never arrived: Process 2\n");
        expect(text, "at train.py:42");            // rank 1's known place
        expect(text, "foreign_watch_program+0x");  // rank 0's return address, in its module
        expect(text, "not in a collective (in MPI_Finalize, called at foreign_watch_program+0x");
        expect(text, "last completed `MPI_Allreduce` #1 (4 x MPI_INT) on MPI_COMM_WORLD");
        foreign::end_collective(world);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    foreign::set_phase("");
    foreign::forget(world);
    if (failures == 0) std::printf("PASS raise rank %d/%d\n", rank, size);
    return failures == 0 ? 0 : 1;
}

int run_skip() {
    skip(watch_world(2.0));
    stay();
}

int run_recv() {
    foreign::Watched* world = watch_world(2.0);
    if (rank == 0) {
        foreign::begin_point_to_point(world, {.name = "MPI_Send",
                                              .direction = foreign::Direction::send,
                                              .peer = 1,
                                              .tag = 8,
                                              .count = 4,
                                              .datatype = "MPI_INT",
                                              .caller = here()});
    } else {
        foreign::begin_point_to_point(world, {.name = "MPI_Recv",
                                              .direction = foreign::Direction::receive,
                                              .peer = 0,
                                              .tag = 7,
                                              .count = 4,
                                              .datatype = "MPI_INT",
                                              .caller = here()});
    }
    stay();
}

int run_wait() {
    foreign::Watched* world = watch_world(2.0);
    if (rank == 0) {
        foreign::begin_point_to_point(world, {.name = "MPI_Wait",
                                              .direction = foreign::Direction::receive,
                                              .peer = 1,
                                              .tag = 3,
                                              .count = 16,
                                              .datatype = "MPI_DOUBLE",
                                              .caller = here(),
                                              .request = "MPI_Irecv",
                                              .request_caller = here()});
    } else {
        foreign::begin_collective(world, {.name = "MPI_Barrier", .caller = here()});
    }
    stay();
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    foreign::start(rank);
    const std::string mode = argc > 1 ? argv[1] : "";
    int rc = 2;
    if (mode == "raise") rc = run_raise();
    if (mode == "skip") rc = run_skip();
    if (mode == "recv") rc = run_recv();
    if (mode == "wait") rc = run_wait();
    MPI_Finalize();
    return rc;
}
