// The jobs of dumps_test.py, each of which leaves a trace file for the test to read.
//
//   trace_job straggler R   20 allreduces; rank R sleeps 100 ms before each one, so it arrives last every time: the
//                           others come straight from the previous allreduce, and would have to wait 100 ms for a
//                           core to lose that place even on a loaded machine. (It sleeps before lockstep's own
//                           collectives at start-up and at finalize too, which the validator leaves out.)
//   trace_job loop DIR      allreduces until the file DIR/stop appears (rank 0 looks, and every rank learns it in
//                           the next allreduce); rank 0 creates DIR/ready after the first one. Every result is
//                           checked; prints "rank R: N iterations, results ok".
//   trace_job hang          allreduces; the last rank leaves before the third, the others wait for it.
//   trace_job mismatch      debug mode: the last rank's allreduce has another shape; every rank catches the
//                           SignatureMismatchError, prints its message, and the ranks meet in a barrier.
#include <lockstep.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    lockstep::ScopedRuntime rt;
    const auto straggle = [&](int late) {
        if (mode == "straggler" && rt->identity().rank == late)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
    };
    const int late = mode == "straggler" && argc > 2 ? std::stoi(argv[2]) : -1;
    straggle(late);  // lockstep's start-up checks run as the world communicator is made
    auto& comm = lockstep::Communicator::world();
    const int me = comm.rank();
    const int n = comm.size();
    if (mode == "straggler") {
        lockstep::Tensor x = lockstep::Tensor::ones({64});
        for (int step = 0; step < 20; ++step) {
            straggle(late);
            comm.allreduce_(x, lockstep::ReduceOp::Mean);
        }
        std::printf("rank %d done\n", me);
        straggle(late);  // and lockstep's check at finalize
        return 0;
    }
    if (mode == "loop") {
        const std::filesystem::path dir = argc > 2 ? argv[2] : ".";
        long iterations = 0;
        bool ok = true;
        while (true) {
            const float stop = me == 0 && std::filesystem::exists(dir / "stop") ? 1.0F : 0.0F;
            lockstep::Tensor x = lockstep::Tensor::from_data<float>({static_cast<float>(me + 1), stop}, {2});
            comm.allreduce_(x, lockstep::ReduceOp::Sum);
            const auto got = x.to_vector<float>();
            ok = ok && got[0] == static_cast<float>(n * (n + 1) / 2);
            ++iterations;
            if (me == 0 && iterations == 1) std::ofstream(dir / "ready") << "ready\n";
            if (got[1] > 0.0F) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::printf("rank %d: %ld iterations, results %s\n", me, iterations, ok ? "ok" : "WRONG");
        return ok ? 0 : 1;
    }
    if (mode == "hang") {
        lockstep::Tensor x = lockstep::Tensor::ones({16});
        for (int step = 0; step < 3; ++step) {
            if (step == 2 && me == n - 1) break;
            comm.allreduce_(x, lockstep::ReduceOp::Sum);
        }
        return 0;
    }
    if (mode == "mismatch") {
        // Twice: only the communicator's first error writes a trace.
        for (int attempt = 0; attempt < 2; ++attempt) {
            lockstep::Tensor x = lockstep::Tensor::ones({me == n - 1 ? 8 : 16});
            try {
                comm.allreduce_(x, lockstep::ReduceOp::Sum);
                std::printf("rank %d: no error\n", me);
            } catch (const lockstep::SignatureMismatchError& e) {
                std::string message = e.what();
                for (char& c : message) {
                    if (c == '\n') c = '|';
                }
                std::printf("rank %d message %d: %s\n", me, attempt, message.c_str());
            }
        }
        std::fflush(stdout);
        comm.barrier();  // every rank stays until the first one has collected the trace
        return 0;
    }
    std::fprintf(stderr, "trace_job: unknown mode '%s'\n", mode.c_str());
    return 2;
}
