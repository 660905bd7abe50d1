// Programs that hang the way real jobs do; with a timeout set, lockstep must report the hang and end the job.
//
//   hang_program [skip]  a training loop in which the last rank leaves early: it skips the third allreduce and goes
//                        on to finalise, while the others wait in that allreduce.
//   hang_program first   the last rank skips the very first allreduce: its last completed call is one of lockstep's
//                        own start-up checks, which the report must say.
//   hang_program tag     process 0 sends 1 MiB to process 1 with tag 1, process 1 waits for tag 2: both are stuck in
//                        the matching calls (a message that large waits for its receiver).
//   hang_program late    the same with 16 bytes: the send completes at once, process 0 goes on to finalise, and
//                        process 1 waits for a tag that never comes.
//   hang_program cycle   processes 0 and 1 both send 1 MiB to each other before receiving: neither send completes.
#include <lockstep.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "skip";
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    const int me = comm.rank();
    if (mode == "skip" || mode == "first") {
        const int skipped_step = mode == "skip" ? 2 : 0;
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        for (int step = 0; step < 3; ++step) {
            if (step == skipped_step && me == comm.size() - 1) break;  // e.g. early stopping seen by one rank
            comm.allreduce_(grad, lockstep::ReduceOp::Mean);
        }
    } else if (mode == "tag" || mode == "late") {
        lockstep::Tensor message = lockstep::Tensor::ones({mode == "tag" ? 256 * 1024 : 4});
        if (me == 0) comm.send(message, 1, /*tag=*/1);
        if (me == 1) comm.recv(message, 0, /*tag=*/2);
    } else if (mode == "cycle") {
        lockstep::Tensor out = lockstep::Tensor::ones({256 * 1024});
        lockstep::Tensor in = lockstep::Tensor::empty({256 * 1024});
        if (me < 2) {
            comm.send(out, 1 - me);
            comm.recv(in, 1 - me);
        }
    } else {
        std::fprintf(stderr, "hang_program: unknown mode '%s' (skip, first, tag, late, cycle)\n", mode.c_str());
        return 2;
    }
    std::printf("rank %d done\n", me);
    std::fflush(stdout);
    return 0;
}
