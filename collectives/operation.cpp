#include "operation_table.hpp"

namespace lockstep {

namespace {
constexpr bool table_in_enum_order() {
    for (std::size_t i = 0; i < detail::op_table.size(); ++i) {
        if (static_cast<std::size_t>(detail::op_table[i].op) != i) return false;
    }
    for (std::size_t i = 0; i < detail::reduce_op_table.size(); ++i) {
        if (static_cast<std::size_t>(detail::reduce_op_table[i].op) != i) return false;
    }
    return true;
}
static_assert(table_in_enum_order(), "the operation tables are indexed by their enums");
static_assert(static_cast<std::size_t>(OpKind::Alltoallv) + 1 == detail::op_table.size());
static_assert(static_cast<std::size_t>(ReduceOp::PremulSum) + 1 == detail::reduce_op_table.size());
}  // namespace

std::string_view op_name(OpKind op) noexcept {
    return detail::traits(op).name;
}

OperationInfo operation_info(OpKind op) noexcept {
    const detail::OpTraits& t = detail::traits(op);
    return {t.name, t.rooted(), t.has_reduce_op, t.point_to_point};
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
    const auto i = static_cast<std::size_t>(op);
    return i < detail::reduce_op_table.size() ? detail::reduce_op_table[i].name : "unknown";
}

}  // namespace lockstep
