// Jobs whose non-blocking operations are left behind the ways real programs leave them; collectives/nonblocking_test.py
// runs them with a short timeout and reads what lockstep says.
//
//   nonblocking_program never_wait   (run without a progress thread) every rank issues 20 iallreduces; the last rank
//                                    never waits for the first and computes instead, so its part never starts: the
//                                    others' wait becomes a report naming the request the last rank never waited for.
//   nonblocking_program unwaited     (with a progress thread) the last rank issues an iallreduce and a receive that
//                                    nothing matches, waits for neither, and finalizes: the job completes, and the
//                                    last rank's warning names both requests.
//   nonblocking_program die          every rank but the last issues an iallreduce and waits; the last rank posts a
//                                    receive and is killed before it issues the allreduce: the report names the
//                                    requests the others wait for.
//   nonblocking_program recv         process 0 waits for an irecv from process 1, which never sends: the report is a
//                                    stuck receive, with the request it waits for.
#include <lockstep.hpp>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    const int me = comm.rank();
    const int last = comm.size() - 1;
    lockstep::Tensor x = lockstep::Tensor::ones({16});
    if (mode == "never_wait") {
        lockstep::Work w = comm.iallreduce_(x);
        std::vector<lockstep::Work> more;  // 19 more behind it: the report lists a few and counts the rest
        for (int i = 0; i < 19; ++i) more.push_back(comm.iallreduce(x));
        if (me == last) {
            std::this_thread::sleep_for(std::chrono::seconds(60));  // computes, and never waits for w
        }
        w.wait();
    } else if (mode == "unwaited") {
        if (me == last) {
            lockstep::Work w = comm.iallreduce_(x);
            lockstep::Tensor in = lockstep::Tensor::zeros({4});
            lockstep::Work r = comm.irecv(in, 0, 42);
        } else {
            comm.iallreduce_(x).wait();
        }
    } else if (mode == "die") {
        if (me == last) {
            lockstep::Tensor in = lockstep::Tensor::zeros({4});
            lockstep::Work r = comm.irecv(in, 0, 42);
            std::fflush(stdout);
            std::raise(SIGKILL);
        }
        lockstep::Tensor in = lockstep::Tensor::zeros({4});
        lockstep::Work r = comm.irecv(in, last, 43);
        lockstep::Work w = comm.iallreduce_(x);
        w.wait();
    } else if (mode == "recv") {
        if (me == 0) {
            lockstep::Tensor in = lockstep::Tensor::zeros({4});
            comm.irecv(in, 1, 5).wait();
        } else {
            std::this_thread::sleep_for(std::chrono::seconds(60));
        }
    } else {
        std::fprintf(stderr, "nonblocking_program: unknown mode '%s' (never_wait, unwaited, die, recv)\n",
                     mode.c_str());
        return 2;
    }
    std::printf("rank %d done\n", me);
    return 0;
}
