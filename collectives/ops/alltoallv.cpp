// alltoallv: rows of dimension 0 to each rank in turn, with counts that differ per peer (MPI_Alltoallv). This process
// sends its first send_counts[0] rows to rank 0, the next send_counts[1] to rank 1, ...; the result holds
// recv_counts[j] rows from each rank j, in rank order. A row is one index of dimension 0 (every other dimension
// whole), so the counts are what torch's all_to_all_single calls split sizes. No padding and no exchange of counts:
// every process gives both lists, and send_counts[j] here must equal recv_counts[i] on rank j. Debug mode checks that
// with one MPI_Alltoall of the counts and one MPI_Allgather of what disagreed, so that every rank raises the same
// error; without debug mode, a disagreement is MPI's (a truncated message, or a hang the watchdog reports).

#include "../communicator_impl.hpp"

#include <fmt/ranges.h>

#include <array>
#include <numeric>
#include <vector>

namespace lockstep {

namespace {

// Elements of one row of t (the product of the dimensions after the first; t has at least one).
std::int64_t row_elements(const Tensor& t) {
    return shape_numel(Shape(t.shape().begin() + 1, t.shape().end()));
}

void check_counts(std::span<const std::int64_t> counts, int size, const char* which) {
    if (counts.size() != static_cast<std::size_t>(size)) {
        throw InvalidArgumentError(
            fmt::format("alltoallv: {} has {} entries; it needs one per process ({})", which, counts.size(), size));
    }
    for (std::size_t j = 0; j < counts.size(); ++j) {
        if (counts[j] < 0) {
            throw InvalidArgumentError(
                fmt::format("alltoallv: {}[{}] is {}; counts are rows, >= 0", which, j, counts[j]));
        }
    }
}

std::int64_t total(std::span<const std::int64_t> counts) {
    return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

// Counts of rows as MPI's element counts and displacements (ints).
struct ElementCounts {
    std::vector<int> counts;
    std::vector<int> displacements;
};
ElementCounts element_counts(std::span<const std::int64_t> rows, std::int64_t row) {
    ElementCounts e;
    e.counts.reserve(rows.size());
    e.displacements.reserve(rows.size());
    std::int64_t at = 0;
    for (std::int64_t r : rows) {
        e.displacements.push_back(detail::checked_count(at, "alltoallv"));
        e.counts.push_back(detail::checked_count(r * row, "alltoallv"));
        at += r * row;
    }
    return e;
}

// Both forms: `allocate` makes `out` in the prepare step (alltoallv), otherwise `out` is the caller's (alltoallv_into).
void alltoallv_call(auto& impl, const Tensor& t, std::span<const std::int64_t> send_counts, Tensor& out,
                    std::span<const std::int64_t> recv_counts, bool allocate, const CallSite& site) {
    impl.run(
        {.op = OpKind::Alltoallv, .input = &t, .output = allocate ? nullptr : &out, .varying_dim = 0, .site = site},
        [&] {
            t.check_defined("alltoallv");
            if (!allocate) {
                out.check_defined("alltoallv");
                out.check_writable("alltoallv");
            }
            if (t.dim() == 0) {
                throw ShapeError(fmt::format("alltoallv: {} has no first dimension to split into rows", t.str()));
            }
            check_counts(send_counts, impl.size, "send_counts");
            check_counts(recv_counts, impl.size, "recv_counts");
            if (total(send_counts) != t.size(0)) {
                throw ShapeError(fmt::format("alltoallv: send_counts [{}] add up to {} rows, but {} has {}",
                                             fmt::join(send_counts, ", "), total(send_counts), t.str(), t.size(0)));
            }
            Shape expected = t.shape();
            expected[0] = total(recv_counts);
            if (allocate) {
                out = Tensor::empty(expected, t.dtype(), t.device());
                return;
            }
            if (out.dtype() != t.dtype() || out.shape() != expected || out.device() != t.device()) {
                const std::string text = fmt::format(
                    "alltoallv: the output must be {}{} {} for recv_counts [{}]; got {}", dtype_name(t.dtype()),
                    shape_str(expected), t.device().str(), fmt::join(recv_counts, ", "), out.str());
                if (out.dtype() != t.dtype()) throw DTypeError(text);
                throw ShapeError(text);
            }
            if (out.data() == t.data() && t.numel() > 0) {
                throw InvalidArgumentError("alltoallv: the output must be another tensor than the input");
            }
        },
        [&] {
            if (impl.debug) {
                // What each peer sends here, against what this process expects from it; then every process learns
                // every disagreement (peer, sent, expected per process), so that all raise the same error.
                std::vector<std::int64_t> sent(send_counts.size());
                impl.mpi(MPI_Alltoall(send_counts.data(), 1, MPI_INT64_T, sent.data(), 1, MPI_INT64_T, impl.comm),
                         "MPI_Alltoall");
                std::array<std::int64_t, 3> mine = {-1, 0, 0};
                for (std::size_t j = 0; j < sent.size(); ++j) {
                    if (sent[j] != recv_counts[j]) {
                        mine = {static_cast<std::int64_t>(j), sent[j], recv_counts[j]};
                        break;
                    }
                }
                std::vector<std::array<std::int64_t, 3>> all(static_cast<std::size_t>(impl.size));
                impl.mpi(MPI_Allgather(mine.data(), 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, impl.comm),
                         "MPI_Allgather");
                std::string each;
                for (std::size_t r = 0; r < all.size(); ++r) {
                    if (all[r][0] < 0) continue;
                    each += fmt::format("\n  - Process {} expects {} rows from process {}, which sends it {}", r,
                                        all[r][2], all[r][0], all[r][1]);
                }
                if (!each.empty()) {
                    throw DistributedOperationError(fmt::format(
                        "lockstep::alltoallv: the processes' counts disagree (send_counts[j] on process i must equal "
                        "recv_counts[i] on process j; every process raises this, nothing was exchanged):{}",
                        each));
                }
            }
            const std::int64_t row = row_elements(t);
            const ElementCounts send = element_counts(send_counts, row);
            const ElementCounts recv = element_counts(recv_counts, row);
            const MPI_Datatype dt = mpi_datatype(t.dtype());
            detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
                impl.mpi(MPI_Alltoallv(src, send.counts.data(), send.displacements.data(), dt, dst, recv.counts.data(),
                                       recv.displacements.data(), dt, impl.comm),
                         "MPI_Alltoallv");
            });
        });
}

}  // namespace

Tensor& Communicator::alltoallv_into(const Tensor& t, std::span<const std::int64_t> send_counts, Tensor& out,
                                     std::span<const std::int64_t> recv_counts, CallSite site) {
    alltoallv_call(*impl_, t, send_counts, out, recv_counts, /*allocate=*/false, site);
    return out;
}

Tensor Communicator::alltoallv(const Tensor& t, std::span<const std::int64_t> send_counts,
                               std::span<const std::int64_t> recv_counts, CallSite site) {
    Tensor out;
    alltoallv_call(*impl_, t, send_counts, out, recv_counts, /*allocate=*/true, site);
    return out;
}

}  // namespace lockstep
