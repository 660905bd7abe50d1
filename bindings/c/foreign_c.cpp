// The C interface: collectives that another library carries (Communicator::begin_foreign and end_foreign).
//
// A check of the arguments that fails on this rank joins the call as a rejection (Communicator::reject_call), as the
// collectives' own checks do: in debug mode the other ranks are already in the call's signature exchange.

#include "c_api_internal.hpp"
#include "operation_values.hpp"

#include <fmt/core.h>

#include <vector>

using namespace lockstep;
using namespace lockstep::c_api;

namespace {

// The ForeignCall of the arguments (shape points into the caller's array), or an error naming the bad one.
ForeignCall foreign_call(OpKind op, lockstep_dtype_t dtype, const int64_t* shape, int32_t ndim,
                         lockstep_device_type_t device, int32_t varying_dim, int32_t root,
                         lockstep_reduce_op_t reduce_op, const char* entry) {
    ForeignCall call{.op = op, .root = root, .varying_dim = varying_dim};
    if (dtype != -1) call.dtype = dtype_of_code(dtype);
    if (ndim < 0 || (ndim > 0 && shape == nullptr)) {
        throw InvalidArgumentError(
            fmt::format("{}: shape is {} with ndim {}", entry, shape == nullptr ? "NULL" : "given", ndim));
    }
    if (ndim > 0) call.shape = {shape, static_cast<std::size_t>(ndim)};
    if (device != LOCKSTEP_DEVICE_CPU && device != LOCKSTEP_DEVICE_CUDA) {
        throw InvalidArgumentError(
            fmt::format("{}: device {} is not LOCKSTEP_DEVICE_CPU or LOCKSTEP_DEVICE_CUDA", entry, device));
    }
    call.device = device == LOCKSTEP_DEVICE_CUDA ? DeviceType::CUDA : DeviceType::CPU;
    if (varying_dim < -1 || varying_dim >= std::max(ndim, 1)) {
        throw InvalidArgumentError(
            fmt::format("{}: varying_dim {} is not -1 or a dimension of the {}-d shape", entry, varying_dim, ndim));
    }
    if (reduce_op != -1) {
        call.reduce_op = reduce_op_of(reduce_op);
        if (!call.reduce_op) {
            throw InvalidArgumentError(fmt::format(
                "{}: unknown reduce op {}; use -1 (none), LOCKSTEP_SUM, _PROD, _MAX, _MIN, _MEAN, _BAND, _BOR, "
                "_BXOR or _PREMUL_SUM",
                entry, reduce_op));
        }
    }
    return call;
}

}  // namespace

extern "C" {

lockstep_status_t lockstep_foreign_begin(lockstep_comm_t comm, lockstep_collective_t collective, lockstep_dtype_t dtype,
                                         const int64_t* shape, int32_t ndim, lockstep_device_type_t device,
                                         int32_t varying_dim, int32_t root, lockstep_reduce_op_t reduce_op,
                                         const lockstep_call_options_t* options, uint64_t* call) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_foreign_begin";
        require_out(call, "call");
        *call = 0;
        Communicator& c = communicator(comm, entry);
        const std::optional<OpKind> op = operation_of(collective);
        if (!op) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("{}: unknown collective {}", entry, collective));
        lockstep_call_options_t parsed;
        const CallSite site = call_site(options, entry, &parsed);
        ForeignCall described;
        try {
            described = foreign_call(*op, dtype, shape, ndim, device, varying_dim, root, reduce_op, entry);
        } catch (...) {
            // The other ranks may be in this call's signature exchange already: join it as rejected.
            c.reject_call(*op, nullptr, root, std::nullopt, std::current_exception(), site);
        }
        *call = c.begin_foreign(described, site);
    });
}

lockstep_status_t lockstep_foreign_end(lockstep_comm_t comm, uint64_t call) {
    return guarded(comm, [&] { communicator(comm, "lockstep_foreign_end").end_foreign(call); });
}

lockstep_status_t lockstep_comm_set_carrier(lockstep_comm_t comm, const char* name) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_comm_set_carrier";
        Communicator& c = communicator(comm, entry);
        c.set_carrier(require(name, "lockstep_comm_set_carrier: name"));
    });
}

}  // extern "C"
