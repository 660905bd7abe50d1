// The job that test_logging_order launches under mpirun: rank 0 writes the in-order blocks while every rank also
// writes every-rank records between them, and the ranks reach each in-order call in a random order.
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <chrono>
#include <random>
#include <thread>

int main() {
    lockstep::ScopedRuntime runtime;
    const int rank = runtime->identity().rank;
    const auto log = lockstep::get_logger("job", lockstep::LogLevel::Info);
    log.info("main only");
    log.info(lockstep::every_rank, "every rank {}", rank);
    std::mt19937 random(static_cast<unsigned>(rank * 7919 + 17));
    std::uniform_int_distribution<int> delay_ms(0, 30);
    for (int round = 0; round < 6; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(random)));
        log.info(lockstep::every_rank, "noise round {} rank {}", round, rank);
        log.info(lockstep::in_rank_order, "ordered: round {} rank {}", round, rank);
    }
    return 0;
}
