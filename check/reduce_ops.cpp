// Reduce ops as signatures compare them (reduce_ops.hpp), and MPI_Op_create/MPI_Op_free, which name the program's
// own ops.

#include "reduce_ops.hpp"

#include "entry.hpp"

#include <lockstep/base/symbolizer.hpp>

#include <fmt/format.h>

#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lockstep::check {
namespace {

struct UserOps {
    std::mutex mutex;
    std::unordered_map<MPI_Op, ReduceOpIdentity> ops;
};

UserOps& user_ops() {
    static auto* u = new UserOps;
    return *u;
}

const std::vector<std::pair<MPI_Op, const char*>>& predefined() {
    static const auto* ops = new std::vector<std::pair<MPI_Op, const char*>>{
        {MPI_MAX, "MPI_MAX"},         {MPI_MIN, "MPI_MIN"},     {MPI_SUM, "MPI_SUM"},       {MPI_PROD, "MPI_PROD"},
        {MPI_LAND, "MPI_LAND"},       {MPI_BAND, "MPI_BAND"},   {MPI_LOR, "MPI_LOR"},       {MPI_BOR, "MPI_BOR"},
        {MPI_LXOR, "MPI_LXOR"},       {MPI_BXOR, "MPI_BXOR"},   {MPI_MAXLOC, "MPI_MAXLOC"}, {MPI_MINLOC, "MPI_MINLOC"},
        {MPI_REPLACE, "MPI_REPLACE"}, {MPI_NO_OP, "MPI_NO_OP"},
    };
    return *ops;
}

}  // namespace

namespace {

// `op`'s identity, or only its key where `name` is false (no text made).
ReduceOpIdentity identify(MPI_Op op, bool name) {
    if (op == MPI_OP_NULL) return {0, name ? "MPI_OP_NULL" : ""};
    const auto& table = predefined();
    for (std::size_t i = 0; i < table.size(); ++i) {
        if (table[i].first == op) return {i + 1, name ? table[i].second : ""};
    }
    UserOps& u = user_ops();
    std::scoped_lock lock(u.mutex);
    const auto it = u.ops.find(op);
    if (it != u.ops.end()) return name ? it->second : ReduceOpIdentity{it->second.key, ""};
    // Made before this library saw it (it cannot be named): every such op compares equal.
    return {0x7573657200000000ULL, name ? "a user op" : ""};
}

}  // namespace

ReduceOpIdentity reduce_op_identity(MPI_Op op) {
    return identify(op, true);
}

std::uint64_t reduce_op_key(MPI_Op op) {
    return identify(op, false).key;
}

}  // namespace lockstep::check

using namespace lockstep::check;

LOCKSTEP_CHECK_ENTRY int MPI_Op_create(MPI_User_function* function, int commute, MPI_Op* op) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Op_create(function, commute, op));
    const int rc = PMPI_Op_create(function, commute, op);
    if (rc != MPI_SUCCESS || !debug_mode) return rc;
    const InsideLockstep inside;
    // The function's own address, looked up as if a call returned to its first byte + 1.
    const auto& where =
        lockstep::base::symbolize_return_address(reinterpret_cast<const char*>(function) + 1);  // NOLINT
    std::string name = where.function;
    if (name.empty()) {
        std::string module = where.module;
        if (const auto slash = module.rfind('/'); slash != std::string::npos) module = module.substr(slash + 1);
        name = fmt::format("{}+{:#x}", module, where.offset);
    }
    ReduceOpIdentity identity{std::hash<std::string>{}(name + (commute != 0 ? "/c" : "/n")) | (1ULL << 63),
                              fmt::format("{} (a user op)", name)};
    UserOps& u = user_ops();
    std::scoped_lock lock(u.mutex);
    u.ops[*op] = std::move(identity);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Op_free(MPI_Op* op) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Op_free(op));
    if (debug_mode) {
        UserOps& u = user_ops();
        std::scoped_lock lock(u.mutex);
        u.ops.erase(*op);
    }
    return PMPI_Op_free(op);
}
