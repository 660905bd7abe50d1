// The non-blocking collectives: each is its blocking form, queued (async/queue.hpp). The tensors are captured by value
// (a Tensor shares its storage), so they stay alive until the call has run; the call record is the blocking form's.

#include "../communicator_impl.hpp"

namespace lockstep {

using detail::WorkState;

Work Communicator::ibarrier(CallSite site) {
    return impl_->submit({.op = OpKind::Barrier, .site = site},
                         [site](Communicator& c, WorkState&) { c.barrier(site); });
}

Work Communicator::ibroadcast(const Tensor& t, int root, CallSite site) {
    return impl_->submit({.op = OpKind::Broadcast, .input = &t, .root = root, .site = site},
                         [t, root, site](Communicator& c, WorkState& w) { w.result = c.broadcast(t, root, site); });
}

Work Communicator::ibroadcast_(Tensor& t, int root, CallSite site) {
    return impl_->submit({.op = OpKind::Broadcast, .input = &t, .root = root, .site = site},
                         [t, root, site](Communicator& c, WorkState& w) mutable {
                             c.broadcast_(t, root, site);
                             w.result = t;
                         });
}

Work Communicator::ireduce(const Tensor& t, Reduction op, int root, CallSite site) {
    return impl_->submit(
        {.op = OpKind::Reduce, .input = &t, .root = root, .reduce_op = op.op, .site = site},
        [t, op, root, site](Communicator& c, WorkState& w) { w.result = c.reduce(t, op, root, site); });
}

Work Communicator::iallreduce(const Tensor& t, Reduction op, CallSite site) {
    return impl_->submit({.op = OpKind::Allreduce, .input = &t, .reduce_op = op.op, .site = site},
                         [t, op, site](Communicator& c, WorkState& w) { w.result = c.allreduce(t, op, site); });
}

Work Communicator::iallreduce_(Tensor& t, Reduction op, CallSite site) {
    return impl_->submit({.op = OpKind::Allreduce, .input = &t, .reduce_op = op.op, .site = site},
                         [t, op, site](Communicator& c, WorkState& w) mutable {
                             c.allreduce_(t, op, site);
                             w.result = t;
                         });
}

Work Communicator::igather(const Tensor& t, int root, CallSite site) {
    return impl_->submit({.op = OpKind::Gather, .input = &t, .root = root, .site = site},
                         [t, root, site](Communicator& c, WorkState& w) { w.result = c.gather(t, root, site); });
}

Work Communicator::iallgather(const Tensor& t, CallSite site) {
    return impl_->submit({.op = OpKind::Allgather, .input = &t, .site = site},
                         [t, site](Communicator& c, WorkState& w) { w.result = c.allgather(t, site); });
}

Work Communicator::iallgather_into(const Tensor& t, Tensor& out, CallSite site) {
    return impl_->submit({.op = OpKind::Allgather, .input = &t, .output = &out, .site = site},
                         [t, out, site](Communicator& c, WorkState& w) mutable {
                             c.allgather_into(t, out, site);
                             w.result = out;
                         });
}

Work Communicator::iscatter(const Tensor& t, int root, CallSite site) {
    return impl_->submit({.op = OpKind::Scatter, .input = &t, .root = root, .site = site},
                         [t, root, site](Communicator& c, WorkState& w) { w.result = c.scatter(t, root, site); });
}

Work Communicator::ireduce_scatter(const Tensor& t, Reduction op, CallSite site) {
    return impl_->submit({.op = OpKind::ReduceScatter, .input = &t, .reduce_op = op.op, .site = site},
                         [t, op, site](Communicator& c, WorkState& w) { w.result = c.reduce_scatter(t, op, site); });
}

Work Communicator::ireduce_scatter_into(const Tensor& t, Tensor& out, Reduction op, CallSite site) {
    return impl_->submit({.op = OpKind::ReduceScatter, .input = &t, .output = &out, .reduce_op = op.op, .site = site},
                         [t, out, op, site](Communicator& c, WorkState& w) mutable {
                             c.reduce_scatter_into(t, out, op, site);
                             w.result = out;
                         });
}

Work Communicator::ialltoall(const Tensor& t, CallSite site) {
    return impl_->submit({.op = OpKind::Alltoall, .input = &t, .site = site},
                         [t, site](Communicator& c, WorkState& w) { w.result = c.alltoall(t, site); });
}

Work Communicator::ialltoallv(const Tensor& t, std::span<const std::int64_t> send_counts,
                              std::span<const std::int64_t> recv_counts, CallSite site) {
    return impl_->submit({.op = OpKind::Alltoallv, .input = &t, .varying_dim = 0, .site = site},
                         [t, send = std::vector<std::int64_t>(send_counts.begin(), send_counts.end()),
                          recv = std::vector<std::int64_t>(recv_counts.begin(), recv_counts.end()),
                          site](Communicator& c, WorkState& w) { w.result = c.alltoallv(t, send, recv, site); });
}

Work Communicator::ialltoallv_into(const Tensor& t, std::span<const std::int64_t> send_counts, Tensor& out,
                                   std::span<const std::int64_t> recv_counts, CallSite site) {
    return impl_->submit({.op = OpKind::Alltoallv, .input = &t, .output = &out, .varying_dim = 0, .site = site},
                         [t, out, send = std::vector<std::int64_t>(send_counts.begin(), send_counts.end()),
                          recv = std::vector<std::int64_t>(recv_counts.begin(), recv_counts.end()),
                          site](Communicator& c, WorkState& w) mutable {
                             c.alltoallv_into(t, send, out, recv, site);
                             w.result = out;
                         });
}

Work Communicator::igather_uneven(const Tensor& t, CallSite site) {
    return impl_->submit({.op = OpKind::GatherUneven, .input = &t, .varying_dim = 0, .site = site},
                         [t, site](Communicator& c, WorkState& w) { w.result = c.gather_uneven(t, site); });
}

Work Communicator::ireject_call(OpKind op, const Tensor* input, int root, std::optional<ReduceOp> reduce_op,
                                std::exception_ptr error, CallSite site) {
    Tensor kept = input != nullptr ? *input : Tensor();
    const bool has_input = input != nullptr;
    return impl_->submit({.op = op, .input = input, .root = root, .reduce_op = reduce_op, .site = site},
                         [op, kept, has_input, root, reduce_op, error, site](Communicator& c, WorkState&) {
                             c.reject_call(op, has_input ? &kept : nullptr, root, reduce_op, error, site);
                         });
}

}  // namespace lockstep
