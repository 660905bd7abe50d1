// Collectives over tensors whose size differs between ranks in one dimension: gather_uneven (row counts exchanged,
// then MPI_Allgatherv), pad_across_processes (the largest size agreed with MPI_Allreduce, then local padding), and
// gather_for_metrics (gather_uneven, then the rows a sampler repeated dropped).

#include "../communicator_impl.hpp"

#include <lockstep/signature.hpp>

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace lockstep {

Tensor Communicator::gather_uneven(const Tensor& t, CallSite site) {
    if (impl_->via_queue()) return igather_uneven(t, site).result();
    Tensor out;
    const auto prepare = [&] {
        t.check_defined("gather_uneven");
        if (t.dim() == 0) {
            throw ShapeError(fmt::format("gather_uneven: {} has no first dimension to concatenate along", t.str()));
        }
    };
    impl_->run({.op = OpKind::GatherUneven, .input = &t, .varying_dim = 0, .site = site}, prepare, [&] {
        const std::int64_t row =
            t.size(0) == 0 ? shape_numel(Shape(t.shape().begin() + 1, t.shape().end())) : t.numel() / t.size(0);
        // Each rank's row count with what its rows are (dtype, rank, trailing dimensions): ranks whose rows differ
        // would otherwise pair counts of elements that are not the same things, and only some of them would notice.
        constexpr std::size_t kDims = 6;  // trailing dimensions carried for the message; the hash covers them all
        using Layout = std::array<std::int64_t, 4 + kDims>;  // rows, dtype, ndim, hash without dimension 0, dims
        const auto layout_of = [&] {
            Layout l{};
            l[0] = t.size(0);
            l[1] = static_cast<std::int64_t>(t.dtype());
            l[2] = t.dim();
            l[3] = static_cast<std::int64_t>(shape_hash(t.shape(), 0));
            for (std::int64_t i = 1; i < t.dim() && static_cast<std::size_t>(i) <= kDims; ++i) {
                l[3 + static_cast<std::size_t>(i)] = t.size(i);
            }
            return l;
        };
        const Layout mine = layout_of();
        std::vector<Layout> layouts(static_cast<std::size_t>(impl_->size));
        impl_->mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, layouts.data(),
                                 static_cast<int>(mine.size()), MPI_INT64_T, impl_->comm),
                   "MPI_Allgather");
        const bool same_rows = std::all_of(layouts.begin(), layouts.end(), [&](const Layout& l) {
            return std::equal(l.begin() + 1, l.end(), layouts.front().begin() + 1);
        });
        if (!same_rows) {
            std::string each;
            for (std::size_t r = 0; r < layouts.size(); ++r) {
                const Layout& l = layouts[r];
                std::vector<std::string> dims{std::to_string(l[0])};
                for (std::int64_t i = 1; i < l[2] && static_cast<std::size_t>(i) <= kDims; ++i) {
                    dims.push_back(std::to_string(l[3 + static_cast<std::size_t>(i)]));
                }
                if (static_cast<std::size_t>(l[2]) > kDims + 1) dims.emplace_back("...");
                each += fmt::format("\n  - Process {}: {}[{}]", r, dtype_name(static_cast<DType>(l[1])),
                                    fmt::join(dims, ", "));
            }
            const bool same_dtype = std::all_of(layouts.begin(), layouts.end(),
                                                [&](const Layout& l) { return l[1] == layouts.front()[1]; });
            const std::string text = fmt::format(
                "gather_uneven: the processes' rows differ (only the first dimension may vary; every process "
                "raises this, nothing was gathered):{}",
                each);
            if (!same_dtype) throw DTypeError(text);
            throw ShapeError(text);
        }
        std::vector<std::int64_t> rows(layouts.size());
        for (std::size_t r = 0; r < layouts.size(); ++r) rows[r] = layouts[r][0];
        std::vector<int> counts(rows.size()), displs(rows.size());
        std::int64_t total = 0;
        for (std::size_t r = 0; r < rows.size(); ++r) {
            counts[r] = detail::checked_count(rows[r] * row, "gather_uneven");
            displs[r] = detail::checked_count(total * row, "gather_uneven");
            total += rows[r];
        }
        Shape shape = t.shape();
        shape[0] = total;
        out = Tensor::empty(shape, t.dtype(), t.device());
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Allgatherv(src, counts[static_cast<std::size_t>(impl_->rank)], dt, dst, counts.data(),
                                      displs.data(), dt, impl_->comm),
                       "MPI_Allgatherv");
        });
    });
    return out;
}

Tensor Communicator::pad_across_processes(const Tensor& t, std::int64_t dim, double pad_value, bool pad_first,
                                          CallSite site) {
    if (impl_->via_queue()) {
        const int varying = t.dim() == 0 ? -1 : static_cast<int>(dim < 0 ? dim + t.dim() : dim);
        return impl_
            ->submit({.op = OpKind::PadAcrossProcesses, .input = &t, .varying_dim = varying, .site = site},
                     [t, dim, pad_value, pad_first, site](Communicator& c, detail::WorkState& w) {
                         w.result = c.pad_across_processes(t, dim, pad_value, pad_first, site);
                     })
            .result();
    }
    // A 0-d tensor has nothing to pad, but the call is still collective: debug mode checks that every rank makes it.
    const std::int64_t d = t.dim() == 0 ? -1 : (dim < 0 ? dim + t.dim() : dim);
    const auto prepare = [&] {
        t.check_defined("pad_across_processes");
        if (t.dim() != 0 && (d < 0 || d >= t.dim())) {
            throw InvalidArgumentError(
                fmt::format("pad_across_processes: dimension {} is out of range for {}", dim, t.str()));
        }
    };
    Tensor out;
    const int varying = d >= 0 && d < t.dim() ? static_cast<int>(d) : -1;
    impl_->run({.op = OpKind::PadAcrossProcesses, .input = &t, .varying_dim = varying, .site = site}, prepare, [&] {
        if (t.dim() == 0) {
            out = t.clone();
            return;
        }
        std::int64_t mine = t.size(d), largest = 0;
        impl_->mpi(MPI_Allreduce(&mine, &largest, 1, MPI_INT64_T, MPI_MAX, impl_->comm), "MPI_Allreduce");
        if (largest == mine) {
            out = t.clone();
            return;
        }
        Shape shape = t.shape();
        shape[static_cast<std::size_t>(d)] = largest;
        out = Tensor::full(shape, pad_value, t.dtype(), t.device());
        // View both as [outer, size(d) * inner]: each outer slice is one contiguous block to place.
        std::int64_t outer = 1, inner = 1;
        for (std::int64_t i = 0; i < d; ++i) outer *= t.size(i);
        for (std::int64_t i = d + 1; i < t.dim(); ++i) inner *= t.size(i);
        const std::size_t elem = dtype_size(t.dtype());
        const std::size_t src_block = static_cast<std::size_t>(mine * inner) * elem;
        const std::size_t dst_block = static_cast<std::size_t>(largest * inner) * elem;
        const std::size_t offset = pad_first ? dst_block - src_block : 0;
        auto* dst = static_cast<char*>(out.data());
        const auto* src = static_cast<const char*>(t.data());
        for (std::int64_t o = 0; o < outer; ++o) {
            copy_bytes(dst + static_cast<std::size_t>(o) * dst_block + offset, out.device(),
                       src + static_cast<std::size_t>(o) * src_block, t.device(), src_block);
        }
    });
    return out;
}

Tensor Communicator::gather_for_metrics(const Tensor& t, std::int64_t valid_rows, CallSite site) {
    if (valid_rows < 0) {
        throw InvalidArgumentError(fmt::format("gather_for_metrics: valid_rows ({}) must be >= 0", valid_rows));
    }
    Tensor all = gather_uneven(t, site);
    return valid_rows >= all.size(0) ? all : all.narrow_rows(0, valid_rows);
}

}  // namespace lockstep
