#include "rank_groups.hpp"

#include <lockstep/batch_size.hpp>
#include <lockstep/logging.hpp>

#include <fmt/core.h>

#include <cmath>
#include <exception>

namespace lockstep {

void free_memory() {
    empty_all_caches();
}

namespace {
enum Outcome : std::int32_t { Fits = 0, OutOfMemory = 1, Failed = 2 };
}

BatchSizeResult find_executable_batch_size(std::int64_t starting_batch_size,
                                           const std::function<void(std::int64_t)>& fn, const BatchSizeOptions& options,
                                           Communicator& comm) {
    if (!(options.factor > 0.0 && options.factor < 1.0)) {
        throw InvalidArgumentError(
            fmt::format("find_executable_batch_size: factor {} must be in (0, 1)", options.factor));
    }
    if (options.minimum < 1) {
        throw InvalidArgumentError(fmt::format("find_executable_batch_size: minimum {} must be >= 1", options.minimum));
    }
    if (starting_batch_size < 1) {
        throw InvalidArgumentError(fmt::format(
            "find_executable_batch_size: starting batch size {} must be >= 1 (the size the search tries first)",
            starting_batch_size));
    }
    const Logger log = get_logger("lockstep.batch_size");
    BatchSizeResult result;
    std::int64_t size = starting_batch_size;
    std::int64_t fits = 0;     // largest size known to fit on every rank
    std::int64_t too_big = 0;  // smallest size known not to fit on some rank (0: none yet)

    // One try, agreed by all ranks: returns true when every rank fit.
    auto attempt = [&](std::int64_t candidate) {
        ++result.attempts;
        Outcome outcome = Fits;
        std::exception_ptr error;
        try {
            fn(candidate);
        } catch (const OutOfMemoryError&) {
            outcome = OutOfMemory;
        } catch (...) {
            outcome = Failed;
            error = std::current_exception();
        }
        // Every rank's outcome and, for errors, its rank: the worst outcome and the lowest failing rank follow.
        Tensor verdict = Tensor::from_data<std::int64_t>(
            {static_cast<std::int64_t>(outcome), outcome == Failed ? comm.rank() : std::int64_t{comm.size()}}, {2});
        Tensor both = comm.allgather(verdict);
        std::int64_t worst_outcome = Fits, failed_rank = comm.size();
        const auto v = both.to_vector<std::int64_t>();
        for (std::size_t i = 0; i + 1 < v.size(); i += 2) {
            worst_outcome = std::max(worst_outcome, v[i]);
            failed_rank = std::min(failed_rank, v[i + 1]);
        }
        if (worst_outcome == Failed) {
            if (error) std::rethrow_exception(error);
            throw DistributedOperationError(fmt::format(
                "find_executable_batch_size: rank {} raised an error other than out-of-memory with batch size {}; "
                "every rank stops (see that rank's output for the error)",
                failed_rank, candidate));
        }
        if (worst_outcome == OutOfMemory) {
            ++result.out_of_memory_retries;
            free_memory();
            return false;
        }
        return true;
    };

    auto below_minimum = [&](std::int64_t s) {
        if (s > 0 && s >= options.minimum) return;
        throw Error(options.minimum <= 1 || s <= 0
                        ? std::string("No executable batch size found, reached zero.")
                        : fmt::format("No executable batch size found, reached {} which is below the minimum of {}.", s,
                                      options.minimum));
    };

    // Shrink until a size fits on every rank.
    while (true) {
        below_minimum(size);
        if (attempt(size)) {
            fits = size;
            break;
        }
        too_big = size;
        const auto next = static_cast<std::int64_t>(std::floor(static_cast<double>(size) * options.factor));
        log.warning("out of memory on at least one rank with batch size {}; every rank retries with {}", size, next);
        size = next;
    }
    // Refine upward: binary search between the largest size that fits and the smallest that did not.
    if (options.refine_upward && too_big > 0) {
        while (too_big - fits > 1) {
            const std::int64_t mid = fits + (too_big - fits) / 2;
            if (attempt(mid)) {
                fits = mid;
            } else {
                too_big = mid;
                log.info("batch size {} does not fit; searching between {} and {}", mid, fits, too_big);
            }
        }
    }
    result.batch_size = fits;
    log.info("batch size {} fits on every rank ({} tries, {} out-of-memory retries)", fits, result.attempts,
             result.out_of_memory_retries);
    return result;
}

std::int64_t global_batch_size(std::int64_t per_process, int processes) {
    if (per_process < 1 || processes < 1) {
        throw InvalidArgumentError(fmt::format("global_batch_size({}, {}): both must be >= 1", per_process, processes));
    }
    return per_process * processes;
}

std::int64_t per_process_batch_size(std::int64_t global, int processes) {
    if (global < 1 || processes < 1 || global % processes != 0) {
        throw InvalidArgumentError(fmt::format(
            "per_process_batch_size: a global batch of {} does not split evenly over {}; choose a global "
            "batch that is a multiple of the number of processes",
            global, detail::count_text(static_cast<std::uint64_t>(std::max(processes, 0)), "process", "processes")));
    }
    return global / processes;
}

std::int64_t check_global_batch_size(std::int64_t per_process, int processes, std::int64_t tuned_global_batch,
                                     double tuned_learning_rate) {
    const std::int64_t global = global_batch_size(per_process, processes);
    if (global != tuned_global_batch) {
        const double scaled =
            tuned_learning_rate * static_cast<double>(global) / static_cast<double>(tuned_global_batch);
        get_logger("lockstep.batch_size")
            .warning(
                "the global batch is {} ({} per process x {}), not the {} this run was tuned for: "
                "scale the learning rate linearly to {:.6g} (or by the square root for adaptive optimisers), or "
                "keep the global batch by using {} per process",
                global, per_process, detail::count_text(static_cast<std::uint64_t>(processes), "process", "processes"),
                tuned_global_batch, scaled,
                tuned_global_batch % processes == 0 ? fmt::format("{}", tuned_global_batch / processes)
                                                    : std::string("a per-process batch that divides it"));
    }
    return global;
}

}  // namespace lockstep
