// Programs that hang the way real jobs do; with a timeout set, lockstep must report the hang and end the job.
//
//   hang_program [skip]  a training loop in which the last rank leaves early: it skips the third allreduce and goes
//                        on to finalise, while the others wait in that allreduce.
//   hang_program first   the last rank skips the very first allreduce: its last completed call is one of lockstep's
//                        own start-up checks, which the report must say.
//   hang_program leader  as skip, with rank 0 leaving early: the lowest rank that waits is in lockstep's check at
//                        finalize, and the report must still lead with the program's allreduce.
//   hang_program upper   as leader, on a communicator of ranks 1 and up: its process 0 (world rank 1) leaves early
//                        while world rank 0, outside it, finalises too.
//   hang_program tag     process 0 sends 1 MiB to process 1 with tag 1, process 1 waits for tag 2: both are stuck in
//                        the matching calls (a message that large waits for its receiver).
//   hang_program late    the same with 16 bytes: the send completes at once, process 0 goes on to finalise, and
//                        process 1 waits for a tag that never comes.
//   hang_program cycle   processes 0 and 1 both send 1 MiB to each other before receiving: neither send completes.
//   hang_program op      the last rank calls a barrier where the others call the third allreduce: every rank is in a
//                        call with the same number, and they disagree on the operation.
//   hang_program extra   as op, after a broadcast that only the last rank makes (as its root, it returns at once):
//                        the ranks are at different call numbers.
//   hang_program cross   the last rank calls an allreduce on a communicator of ranks 1 and up while the others call
//                        one on the world: each call waits for processes stuck in the other.
//   hang_program steps   no hang: every rank makes the same three allreduces (for the start-up settings check).
//   hang_program eager   no hang: the last rank makes one broadcast more than the others, as its root (a small one
//                        returns at once), and every rank finalises: the call counts at finalize differ.
//   hang_program host    as skip, in a program that owns MPI: the last rank calls MPI_Finalize itself, without
//                        lockstep::Runtime::finalize, so it waits inside MPI_Finalize while the others are stuck.
#include <lockstep.hpp>

#include <mpi.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "skip";
    if (mode == "host") {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        lockstep::Runtime::init();
        auto& comm = lockstep::Communicator::world();
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        for (int step = 0; step < 3; ++step) {
            if (step == 2 && comm.rank() == comm.size() - 1) break;
            comm.allreduce_(grad, lockstep::ReduceOp::Mean);
        }
        std::printf("rank %d done\n", comm.rank());
        std::fflush(stdout);
        MPI_Finalize();
        return 0;
    }
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    const int me = comm.rank();
    if (mode == "skip" || mode == "first" || mode == "leader") {
        const int skipped_step = mode == "first" ? 0 : 2;
        const int leaving = mode == "leader" ? 0 : comm.size() - 1;
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        for (int step = 0; step < 3; ++step) {
            if (step == skipped_step && me == leaving) break;  // e.g. early stopping seen by one rank
            comm.allreduce_(grad, lockstep::ReduceOp::Mean);
        }
    } else if (mode == "upper") {
        lockstep::Communicator upper = comm.split(me >= 1 ? 0 : 1, me);
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        if (me >= 1) {
            for (int step = 0; step < 3; ++step) {
                if (step == 2 && upper.rank() == 0) break;
                upper.allreduce_(grad, lockstep::ReduceOp::Mean);
            }
        }
    } else if (mode == "steps" || mode == "eager") {
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        for (int step = 0; step < 3; ++step) comm.allreduce_(grad, lockstep::ReduceOp::Mean);
        if (mode == "eager" && me == comm.size() - 1) comm.broadcast_(grad, me);
    } else if (mode == "op" || mode == "extra") {
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        for (int step = 0; step < 2; ++step) comm.allreduce_(grad, lockstep::ReduceOp::Mean);
        if (me == comm.size() - 1) {
            if (mode == "extra") comm.broadcast_(grad, me);
            comm.barrier();
        } else {
            comm.allreduce_(grad, lockstep::ReduceOp::Mean);
        }
    } else if (mode == "cross") {
        lockstep::Communicator upper = comm.split(me >= 1 ? 0 : 1, me);
        lockstep::Tensor grad = lockstep::Tensor::ones({16});
        if (me == comm.size() - 1) {
            upper.allreduce_(grad, lockstep::ReduceOp::Sum);
        } else {
            comm.allreduce_(grad, lockstep::ReduceOp::Sum);
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
        std::fprintf(
            stderr,
            "hang_program: unknown mode '%s' (skip, first, leader, upper, steps, eager, op, extra, cross, tag, late, "
            "cycle, host)\n",
            mode.c_str());
        return 2;
    }
    std::printf("rank %d done\n", me);
    std::fflush(stdout);
    return 0;
}
