// A communicator whose timeout raises (on_timeout raise), with its last rank skipping a collective.
//
//   timeout_raise_program raise      on a duplicate of the world with a 1 s timeout in raise mode, every rank makes one
//                                    allreduce; then the last rank skips the second one and computes (sleeps) while
//                                    the others wait in it. The waiting ranks get a TimeoutError whose text names
//                                    the missing rank and what it did last; every later call on that communicator
//                                    (blocking, non-blocking, dup) throws a TimeoutError at once, naming the earlier
//                                    timeout; the world still works once the last rank is back (an allreduce of every
//                                    rank); the broken communicator is freed without hanging, and the job exits 0.
//   timeout_raise_program nonblocking  as raise, with the stuck call an iallreduce waited for with wait(), and a
//                                    second one queued behind it: both fail with the same TimeoutError.
//   timeout_raise_program late       as raise, and the last rank makes the skipped allreduce after all, once the others
//                                    timed out: it matches their call still pending on their progress threads, and
//                                    completes with the sum (the timed-out side stays broken; nothing crashes).
//   timeout_raise_program no_thread  raise mode on a communicator without a progress thread: a ConfigError on every
//                                    rank, and the job goes on.
//
// Each rank prints "PASS timeout_raise_<mode> rank r/n" when every check held.
#include <lockstep.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
    if (!ok) {
        std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
        ++failures;
    }
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Runs `call`, which must throw a TimeoutError; returns its text.
template <typename Call>
std::string timeout_text(Call&& call, const std::string& what, int rank) {
    try {
        call();
    } catch (const lockstep::TimeoutError& e) {
        return e.what();
    } catch (const std::exception& e) {
        expect(false, what + " throws a TimeoutError, not: " + e.what(), rank);
        return {};
    }
    expect(false, what + " throws a TimeoutError", rank);
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "raise";
    lockstep::Runtime::init();
    auto& world = lockstep::Communicator::world();
    const int rank = world.rank();
    const int size = world.size();
    const int last = size - 1;
    const lockstep::Tensor ones = lockstep::Tensor::full({4}, 1.0, lockstep::DType::Float32);

    if (mode == "no_thread") {
        lockstep::CommunicatorOptions options;
        options.timeout = 1.0;
        options.progress_thread = false;
        options.on_timeout = lockstep::OnTimeout::Raise;
        try {
            auto c = world.dup(options);
            expect(false, "raise mode without a progress thread is refused", rank);
        } catch (const lockstep::ConfigError& e) {
            expect(contains(e.what(), "progress thread"), std::string("the ConfigError says why: ") + e.what(), rank);
        }
    } else {
        lockstep::CommunicatorOptions options;
        options.timeout = 1.0;
        options.on_timeout = lockstep::OnTimeout::Raise;
        auto comm = std::make_unique<lockstep::Communicator>(world.dup(options));
        expect(comm->on_timeout() == lockstep::OnTimeout::Raise, "the communicator is in raise mode", rank);
        expect(comm->dup().on_timeout() == lockstep::OnTimeout::Raise, "a duplicate inherits raise mode", rank);
        const lockstep::Tensor first = comm->allreduce(ones);
        expect(first.data<float>()[0] == static_cast<float>(size), "the first allreduce sums", rank);
        if (rank == last) {
            // Computes while the others wait: well past the timeout and the report.
            std::this_thread::sleep_for(std::chrono::seconds(5));
            expect(!comm->timed_out(), "the rank that did not wait is untouched", rank);
            if (mode == "late") {
                // Once every waiting rank has its TimeoutError (each says so on the world): no timing involved.
                lockstep::Tensor note = lockstep::Tensor::full({1}, 0.0, lockstep::DType::Float32);
                for (int r = 0; r < last; ++r) world.recv(note, r, 7);
                const lockstep::Tensor late = comm->allreduce(ones);
                expect(late.data<float>()[0] == static_cast<float>(size), "the late allreduce completes", rank);
            }
        } else {
            std::string text;
            if (mode == "nonblocking") {
                lockstep::Work stuck = comm->iallreduce(ones);
                lockstep::Work behind = comm->ibarrier();
                text = timeout_text([&] { stuck.wait(); }, "the stuck iallreduce's wait", rank);
                const std::string queued = timeout_text([&] { behind.wait(); }, "the queued ibarrier's wait", rank);
                expect(queued == text, "the call queued behind fails with the same report", rank);
            } else {
                text = timeout_text([&] { (void)comm->allreduce(ones); }, "the stuck allreduce", rank);
            }
            if (rank == 0) std::printf("The TimeoutError's text:\n%s\n", text.c_str());
            const std::string missing = "Never arrived: Process " + std::to_string(last);
            expect(contains(text, "timed out after"), "the TimeoutError carries the report: " + text, rank);
            expect(contains(text, missing), "the report names rank " + std::to_string(last) + ": " + text, rank);
            expect(contains(text, "last completed `lockstep::allreduce` #1"),
                   "the report says what the missing rank did last: " + text, rank);
            expect(contains(text, "timeout_raise_program.cpp:"), "the report gives the call site: " + text, rank);
            expect(comm->timed_out(), "the communicator is marked broken", rank);
            const std::string later = timeout_text([&] { comm->barrier(); }, "a later barrier", rank);
            expect(contains(later, "timed out earlier"), "a later call says the communicator timed out: " + later,
                   rank);
            expect(contains(later, "`lockstep::allreduce` #2"), "... with the original headline: " + later, rank);
            (void)timeout_text([&] { (void)comm->iallreduce(ones); }, "a later iallreduce", rank);
            (void)timeout_text([&] { (void)comm->dup(); }, "a later dup", rank);
            if (mode == "late") world.send(ones.narrow_rows(0, 1), last, 7);
        }
        comm.reset();  // must not hang, broken or not
        const lockstep::Tensor all = world.allreduce(ones);
        expect(all.data<float>()[0] == static_cast<float>(size), "the world still works", rank);
    }
    world.barrier();
    if (failures == 0) std::printf("PASS timeout_raise_%s rank %d/%d\n", mode.c_str(), rank, size);
    std::fflush(stdout);
    lockstep::Runtime::finalize();
    return failures == 0 ? 0 : 1;
}
