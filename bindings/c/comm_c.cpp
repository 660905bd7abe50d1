// The C interface: communicators and their collectives.
//
// Each collective maps onto the C++ Communicator. Where C passes an output tensor that the C++ operation does not
// take, this layer checks it first; a check that fails joins the call through Communicator::reject_call, so that in
// debug mode every rank raises the same CallRejectedError (the ranks whose arguments were fine are already in the
// call and would otherwise wait). In place means output == input.

#include "c_api_internal.hpp"
#include "operation_values.hpp"

#include <lockstep/kernels.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>

#include <mpi.h>

#include <limits>
#include <string_view>

#if LOCKSTEP_C_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "lockstep_mpi.h"

#include <vector>

using namespace lockstep;
using namespace lockstep::c_api;

namespace {

void require_runtime(const char* entry) {
    if (!Runtime::initialized()) {
        fail(LOCKSTEP_ERROR_INVALID_USAGE, fmt::format("{}: call lockstep_init first", entry));
    }
}

CommunicatorOptions comm_options(const lockstep_comm_options_t* options, const char* entry) {
    static const lockstep_comm_options_t defaults = LOCKSTEP_COMM_OPTIONS_INIT;
    const lockstep_comm_options_t o = read_options(options, defaults, "lockstep_comm_options_t");
    check_flags(o.flags, 0, entry);
    CommunicatorOptions co;
    if (o.debug >= 0) co.debug = o.debug != 0;
    if (o.timeout >= 0.0) co.timeout = o.timeout;
    if (o.shared_memory >= 0) co.shared_memory = o.shared_memory != 0;
    if (o.on_timeout == LOCKSTEP_ON_TIMEOUT_END) co.on_timeout = OnTimeout::End;
    if (o.on_timeout == LOCKSTEP_ON_TIMEOUT_RAISE) co.on_timeout = OnTimeout::Raise;
    if (o.on_timeout < -1 || o.on_timeout > LOCKSTEP_ON_TIMEOUT_RAISE) {
        fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: on_timeout {} is not -1 (from the configuration), LOCKSTEP_ON_TIMEOUT_END or "
                         "LOCKSTEP_ON_TIMEOUT_RAISE",
                         entry, o.on_timeout));
    }
    return co;
}

// Makes a communicator's errors return while it lives, and gives the communicator its own error handler back after.
class ErrorsReturned {
public:
    explicit ErrorsReturned(MPI_Comm comm) : comm_(comm) {
        LOCKSTEP_MPI_CHECK(MPI_Comm_get_errhandler(comm_, &handler_));
        LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    }
    ~ErrorsReturned() {
        MPI_Comm_set_errhandler(comm_, handler_);
        MPI_Errhandler_free(&handler_);
    }
    ErrorsReturned(const ErrorsReturned&) = delete;
    ErrorsReturned& operator=(const ErrorsReturned&) = delete;

private:
    MPI_Comm comm_;
    MPI_Errhandler handler_ = MPI_ERRHANDLER_NULL;
};

// Whether a handle names a live communicator, asked of MPI itself: MPI_Comm_f2c looks an index up in Open MPI (a
// null pointer for one it does not know), but is a plain cast in MPICH, whose handles are integers, so only MPI can
// tell a stale or made-up handle. The error of an invalid handle goes to the handler of MPI_COMM_WORLD or of
// MPI_COMM_SELF (which one is the implementation's choice): both return errors while MPI is asked.
bool is_live_communicator(MPI_Comm comm) {
    const ErrorsReturned world(MPI_COMM_WORLD);
    const ErrorsReturned self(MPI_COMM_SELF);
    int inter = 0;
    return MPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS;
}

lockstep_comm_s* adopt(MPI_Comm comm, const lockstep_comm_options_t* options, const char* entry) {
    require_runtime(entry);
    if (comm == MPI_COMM_NULL) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("{}: MPI_COMM_NULL", entry));
    return new_comm_handle(std::make_unique<Communicator>(comm, comm_options(options, entry)), false);
}

// The collective's own C-side checks, then the call. A failed check joins the call as a rejection (see the top).
struct Call {
    Communicator& comm;
    OpKind op;
    const Tensor* input = nullptr;
    int root = -1;
    std::optional<ReduceOp> reduce_op;
    CallSite site;

    template <typename Check, typename Run>
    void operator()(Check&& check, Run&& run) {
        std::exception_ptr error;
        try {
            check();
        } catch (...) {
            error = std::current_exception();
        }
        if (error) comm.reject_call(op, input, root, reduce_op, error, site);
        run();
    }
};

// A handle argument the collective needs: refused when NULL or no live tensor's (`t` is live_tensor(h)).
void check_tensor(const Tensor* t, const lockstep_tensor_s* h, const char* entry, const char* which) {
    if (t == nullptr) throw InvalidArgumentError(dead_tensor_text(h, entry, which));
}
// A handle argument this rank may leave NULL: refused only when it is given and no live tensor's.
void check_optional(const Tensor* t, const lockstep_tensor_s* h, const char* entry, const char* which) {
    if (t == nullptr && h != nullptr) throw InvalidArgumentError(dead_tensor_text(h, entry, which));
}

// An output of the wrong dtype is a dtype error, on the wrong device a device error, of the wrong shape a shape error.
void check_like(const Tensor& out, const Shape& shape, const Tensor& like, const char* entry) {
    const bool dtype_differs = out.dtype() != like.dtype();
    const bool device_differs = out.device() != like.device();
    if (dtype_differs || device_differs || out.shape() != shape) {
        const std::string text =
            fmt::format("{}: the output must be {}{} {} for input {}; got {}", entry, dtype_name(like.dtype()),
                        shape_str(shape), like.device().str(), like.str(), out.str());
        if (dtype_differs) throw DTypeError(text);
        if (device_differs) throw DeviceError(text);
        throw ShapeError(text);
    }
    out.check_writable(entry);
}

Shape stacked(const Tensor& t, std::int64_t parts) {
    if (t.dim() == 0) return {parts};
    Shape s = t.shape();
    s[0] *= parts;
    return s;
}

Shape split(const Shape& shape, std::int64_t parts) {
    Shape s = shape;
    if (!s.empty()) s[0] /= parts;
    return s;
}

// The reduce op, or a rejection naming the bad code.
ReduceOp require_op(std::optional<ReduceOp> op, lockstep_reduce_op_t code, const char* entry) {
    if (!op) {
        throw InvalidArgumentError(
            fmt::format("{}: unknown reduce op {}; use LOCKSTEP_SUM, _PROD, _MAX, _MIN, _MEAN, _BAND, _BOR, _BXOR or "
                        "_PREMUL_SUM",
                        entry, code));
    }
    return *op;
}

// The reduce op with premul_sum's factor from the call options (read again: begin_call or the non-blocking call
// has checked them already; options it refused never get here).
Reduction reduction(ReduceOp op, const lockstep_call_options_t* options) {
    if (op != ReduceOp::PremulSum) return op;
    static const lockstep_call_options_t defaults = LOCKSTEP_CALL_OPTIONS_INIT;
    return premul_sum(read_options(options, defaults, "lockstep_call_options_t").premul_factor);
}

// A collective's tensor arguments: the handles as given and the tensors behind them (null for a NULL or dead handle).
// The same handle for both means in place.
struct Tensors {
    lockstep_tensor_s* input_handle;
    lockstep_tensor_s* output_handle;
    Tensor* in;
    Tensor* out;
    Tensors(lockstep_tensor_s* input, lockstep_tensor_s* output)
        : input_handle(input),
          output_handle(output),
          in(live_tensor(input)),
          out(output == input ? in : live_tensor(output)) {}
    [[nodiscard]] bool in_place() const noexcept { return input_handle == output_handle; }
    void check_input(const char* entry) const { check_tensor(in, input_handle, entry, "input"); }
    void check_output(const char* entry) const { check_tensor(out, output_handle, entry, "output"); }
};

// The checks of each collective's C arguments, shared by its blocking and non-blocking forms.

void check_broadcast(const Tensors& a, bool is_root, const char* entry) {
    if (a.in_place()) {
        a.check_input(entry);
        return;
    }
    a.check_output(entry);
    if (is_root) {
        a.check_input(entry);
    } else {
        check_optional(a.in, a.input_handle, entry, "input");
    }
    // Root or not: a wrong output on every process then fails on every process, none waits alone.
    if (a.in != nullptr) check_like(*a.out, a.in->shape(), *a.in, entry);
}

// reduce and gather: the root's output must have `shape`. A non-root's output is not written: NULL or the input is not
// checked, any other is, like the root's.
void check_root_output(const Tensors& a, bool is_root, const Shape& shape, const char* entry) {
    if (is_root) {
        a.check_output(entry);
    } else {
        check_optional(a.out, a.output_handle, entry, "output");
    }
    if (a.out != nullptr && (is_root || !a.in_place())) check_like(*a.out, shape, *a.in, entry);
}

void check_reduce(const Tensors& a, std::optional<ReduceOp> rop, lockstep_reduce_op_t op, bool is_root,
                  const char* entry) {
    a.check_input(entry);
    require_op(rop, op, entry);
    check_root_output(a, is_root, a.in->shape(), entry);
}

void check_allreduce(const Tensors& a, std::optional<ReduceOp> rop, lockstep_reduce_op_t op, const char* entry) {
    a.check_input(entry);
    a.check_output(entry);
    require_op(rop, op, entry);
    check_like(*a.out, a.in->shape(), *a.in, entry);
}

void check_gather(const Tensors& a, bool is_root, int size, const char* entry) {
    a.check_input(entry);
    check_root_output(a, is_root, stacked(*a.in, size), entry);
}

void check_allgather(const Tensors& a, const char* entry) {
    a.check_input(entry);
    a.check_output(entry);
    if (a.in_place())
        throw InvalidArgumentError(fmt::format("{}: the output must be another tensor than the input", entry));
}

// scatter: non-roots may pass no input; a placeholder of the root's shape then stands in (MPI does not read it), and
// is what the call describes. Returns the input to pass.
const Tensor* check_scatter(const Tensors& a, bool is_root, int size, Tensor& placeholder, const char* entry) {
    a.check_output(entry);
    if (is_root) {
        a.check_input(entry);
    } else {
        check_optional(a.in, a.input_handle, entry, "input");
    }
    const Tensor* in = a.in;
    if (in == nullptr) {
        placeholder = Tensor::empty(stacked(*a.out, size), a.out->dtype(), a.out->device());
        in = &placeholder;
    }
    if (in->dim() == 0 || in->size(0) % size != 0) {
        throw ShapeError(fmt::format("{}: the first dimension of {} must be a multiple of the number of processes, {}",
                                     entry, in->str(), size));
    }
    check_like(*a.out, split(in->shape(), size), *in, entry);
    return in;
}

// reduce_scatter_into takes no half types: those go through reduce_scatter's own float32 accumulator and a copy.
bool half_type(const Tensor* t) {
    return t != nullptr && (t->dtype() == DType::Float16 || t->dtype() == DType::BFloat16);
}

void check_reduce_scatter(const Tensors& a, std::optional<ReduceOp> rop, lockstep_reduce_op_t op, int size,
                          const char* entry) {
    a.check_input(entry);
    a.check_output(entry);
    require_op(rop, op, entry);
    if (a.in_place())
        throw InvalidArgumentError(fmt::format("{}: the output must be another tensor than the input", entry));
    if (half_type(a.in)) check_like(*a.out, split(a.in->shape(), size), *a.in, entry);
}

void check_alltoall(const Tensors& a, const char* entry) {
    a.check_input(entry);
    a.check_output(entry);
    check_like(*a.out, a.in->shape(), *a.in, entry);
}

// alltoallv's tensors and count arrays (one per process, non-NULL; the C++ operation checks their values).
struct AlltoallvCounts {
    std::span<const std::int64_t> send;
    std::span<const std::int64_t> recv;
};
AlltoallvCounts check_alltoallv(const Tensors& a, const int64_t* send_counts, const int64_t* recv_counts, int size,
                                const char* entry) {
    a.check_input(entry);
    a.check_output(entry);
    for (const auto& [counts, which] : {std::pair{send_counts, "send_counts"}, std::pair{recv_counts, "recv_counts"}}) {
        if (counts == nullptr) throw InvalidArgumentError(fmt::format("{}: {} is NULL", entry, which));
    }
    const auto n = static_cast<std::size_t>(size);
    return {{send_counts, n}, {recv_counts, n}};
}

// A request's copy of the operation's new result tensor into the caller's output (lockstep_request_s::finish).
std::function<void(const Tensor&)> copy_into(Tensor out) {
    return [out = std::move(out)](const Tensor& result) mutable { ops::copy_(out, result); };
}

// lockstep_reject_call and lockstep_ireject_call: the collective named (unknown: INVALID_ARGUMENT at once), its reduce
// op where it has one, and the error its rejection carries.
OpKind rejected_operation(lockstep_collective_t collective, const char* entry) {
    const std::optional<OpKind> op = operation_of(collective);
    if (!op) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("{}: unknown collective {}", entry, collective));
    return *op;
}
std::optional<ReduceOp> rejected_reduce_op(OpKind op, lockstep_reduce_op_t reduce_op) {
    return operation_info(op).reduces ? reduce_op_of(reduce_op) : std::nullopt;
}
std::exception_ptr rejection(const char* message) {
    return std::make_exception_ptr(
        InvalidArgumentError(message != nullptr ? message : "the caller's arguments could not be converted"));
}

// The communicator of a non-blocking call, with the caller's request handle set to NULL first: a call that fails at
// once leaves none to free.
Communicator& nonblocking_communicator(lockstep_comm_s* comm, const char* entry, lockstep_request_t* request) {
    if (request != nullptr) *request = nullptr;
    return communicator(comm, entry);
}

// The non-blocking form of Call: the call options and this layer's checks (with whatever must happen before the
// operation is issued), then `start`, which issues the C++ operation into the new request. When the options or a
// check fail, the rejection is issued instead (Communicator::ireject_call): its wait raises what the blocking form
// raises at once, in debug mode on every rank, and no rank waits for this one. Without a place for the request
// (NULL), the rejection runs on unwaited and this call fails at once.
struct NonBlockingCall {
    Communicator& comm;
    lockstep_comm_s* handle;
    const char* entry;
    OpKind op;
    const Tensor* input = nullptr;
    int root = -1;
    std::optional<ReduceOp> reduce_op;

    template <typename Check, typename Start>
    void operator()(const lockstep_call_options_t* options, lockstep_request_t* request, Check&& check, Start&& start) {
        NewRequestHandle r;
        r->comm = handle;
        // The caller's place, once its options were read; the fallback is written only after the try. (Assigned over
        // a fallback, a variable read after the assigning call threw held garbage in a -O1 -fsanitize=thread build.)
        std::optional<CallSite> given;
        std::exception_ptr error;
        try {
            given.emplace(nonblocking_call_site(options, entry));
            if (request == nullptr) throw InvalidArgumentError(fmt::format("{}: request is NULL", entry));
            check();
        } catch (...) {
            error = std::current_exception();
        }
        CallSite site;
        if (given) {
            site = *given;
        } else {
            site.file_name = "<C caller>";
            site.function_name = entry;
        }
        if (error) {
            r->work = comm.ireject_call(op, input, root, reduce_op, error, site);
            if (request == nullptr) std::rethrow_exception(error);
        } else {
            start(site, *r.operator->());
        }
        *request = r.release();
    }
};

}  // namespace

namespace lockstep::c_api {

// Waits for the caller's stream before a collective reads or writes device memory ordered on it.
void wait_for_stream(void* stream) {
    if (stream == nullptr) return;
#if LOCKSTEP_C_HAVE_CUDA
    const cudaError_t rc = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    if (rc != cudaSuccess) {
        throw CudaError("cudaStreamSynchronize", static_cast<int>(rc), cudaGetErrorString(rc),
                        std::source_location::current());
    }
#else
    throw DeviceError("a CUDA stream was passed to a collective, but this liblockstep_c was built without CUDA");
#endif
}

CallSite begin_call(Communicator& c, const lockstep_call_options_t* options, const char* entry, OpKind op,
                    const Tensor* input, int root, std::optional<ReduceOp> reduce_op) {
    try {
        lockstep_call_options_t parsed;
        CallSite site = call_site(options, entry, &parsed);
        wait_for_stream(parsed.cuda_stream);
        return site;
    } catch (...) {
        CallSite site;
        site.file_name = "<C caller>";
        site.function_name = entry;
        c.reject_call(op, input, root, reduce_op, std::current_exception(), site);
    }
}

CallSite nonblocking_call_site(const lockstep_call_options_t* options, const char* entry) {
    lockstep_call_options_t parsed;
    CallSite site = call_site(options, entry, &parsed);
    wait_for_stream(parsed.cuda_stream);
    if (!site.tag.empty()) site.tag = intern(site.tag);
    return site;
}

}  // namespace lockstep::c_api

extern "C" {

// ---------------------------------------------------------------- communicators

lockstep_status_t lockstep_comm_world(lockstep_comm_t* comm) {
    return guarded(nullptr, [&] {
        require_out(comm, "comm");
        require_runtime("lockstep_comm_world");
        *comm = new_comm_handle(nullptr, true);
    });
}

lockstep_status_t lockstep_comm_from_fortran(int64_t fortran_handle, const lockstep_comm_options_t* options,
                                             lockstep_comm_t* comm) {
    return guarded(nullptr, [&] {
        require_out(comm, "comm");
        require_runtime("lockstep_comm_from_fortran");
        if (fortran_handle < std::numeric_limits<MPI_Fint>::min() ||
            fortran_handle > std::numeric_limits<MPI_Fint>::max()) {
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 fmt::format("lockstep_comm_from_fortran: {} is not a Fortran communicator handle (MPI_Fint holds "
                             "{}..{}); pass what MPI_Comm_c2f or mpi4py's Comm.py2f() gave",
                             fortran_handle, std::numeric_limits<MPI_Fint>::min(),
                             std::numeric_limits<MPI_Fint>::max()));
        }
        const MPI_Comm c = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_handle));
        // Open MPI answers an index it does not know with a null pointer, which is not MPI_COMM_NULL; handing either,
        // or a handle MPI does not know, to a collective would end the job under MPI_ERRORS_ARE_FATAL.
        if (c == MPI_Comm{} || c == MPI_COMM_NULL || !is_live_communicator(c)) {
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 fmt::format("lockstep_comm_from_fortran: {} is not the Fortran handle of a live communicator; pass "
                             "what MPI_Comm_c2f or mpi4py's Comm.py2f() gave",
                             fortran_handle));
        }
        *comm = adopt(c, options, "lockstep_comm_from_fortran");
    });
}

lockstep_status_t lockstep_comm_from_mpi(MPI_Comm mpi_comm, const lockstep_comm_options_t* options,
                                         lockstep_comm_t* comm) {
    return guarded(nullptr, [&] {
        require_out(comm, "comm");
        *comm = adopt(mpi_comm, options, "lockstep_comm_from_mpi");
    });
}

lockstep_status_t lockstep_comm_get_mpi(lockstep_comm_t comm, MPI_Comm* out) {
    return guarded(comm, [&] {
        require_out(out, "out");
        *out = communicator(comm, "lockstep_comm_get_mpi").mpi_comm();
    });
}

lockstep_status_t lockstep_comm_split(lockstep_comm_t comm, int32_t color, int32_t key, lockstep_comm_t* out) {
    return lockstep_comm_split_with_options(comm, color, key, nullptr, out);
}

lockstep_status_t lockstep_comm_split_with_options(lockstep_comm_t comm, int32_t color, int32_t key,
                                                   const lockstep_comm_options_t* options, lockstep_comm_t* out) {
    return guarded(comm, [&] {
        require_out(out, "out");
        Communicator& c = communicator(comm, "lockstep_comm_split");
        const CommunicatorOptions given =
            options != nullptr ? comm_options(options, "lockstep_comm_split_with_options") : CommunicatorOptions{};
        if (color == LOCKSTEP_UNDEFINED_COLOR) {
            // Takes part in the split without joining a group.
            MPI_Comm none = MPI_COMM_NULL;
            LOCKSTEP_MPI_CHECK(MPI_Comm_split(c.mpi_comm(), MPI_UNDEFINED, key, &none));
            *out = nullptr;
            return;
        }
        *out = new_comm_handle(std::make_unique<Communicator>(c.split(color, key, given)), false);
    });
}

lockstep_status_t lockstep_comm_dup(lockstep_comm_t comm, lockstep_comm_t* out) {
    return lockstep_comm_dup_with_options(comm, nullptr, out);
}

lockstep_status_t lockstep_comm_dup_with_options(lockstep_comm_t comm, const lockstep_comm_options_t* options,
                                                 lockstep_comm_t* out) {
    return guarded(comm, [&] {
        require_out(out, "out");
        const CommunicatorOptions given =
            options != nullptr ? comm_options(options, "lockstep_comm_dup_with_options") : CommunicatorOptions{};
        *out =
            new_comm_handle(std::make_unique<Communicator>(communicator(comm, "lockstep_comm_dup").dup(given)), false);
    });
}

lockstep_status_t lockstep_comm_create_group(lockstep_comm_t comm, const int32_t* ranks, size_t count, int32_t tag,
                                             lockstep_comm_t* out) {
    return lockstep_comm_create_group_with_options(comm, ranks, count, tag, nullptr, out);
}

lockstep_status_t lockstep_comm_create_group_with_options(lockstep_comm_t comm, const int32_t* ranks, size_t count,
                                                          int32_t tag, const lockstep_comm_options_t* options,
                                                          lockstep_comm_t* out) {
    return guarded(comm, [&] {
        require_out(out, "out");
        if (ranks == nullptr && count > 0)
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, "lockstep_comm_create_group: ranks is NULL");
        const CommunicatorOptions given = options != nullptr
                                              ? comm_options(options, "lockstep_comm_create_group_with_options")
                                              : CommunicatorOptions{};
        std::vector<int> list(ranks, ranks + count);
        *out = new_comm_handle(std::make_unique<Communicator>(
                                   communicator(comm, "lockstep_comm_create_group").create_group(list, tag, given)),
                               false);
    });
}

lockstep_status_t lockstep_comm_get_on_timeout(lockstep_comm_t comm, int32_t* on_timeout, int32_t* timed_out) {
    return guarded(comm, [&] {
        const Communicator& c = communicator(comm, "lockstep_comm_get_on_timeout");
        if (on_timeout != nullptr) {
            *on_timeout = c.on_timeout() == OnTimeout::Raise ? LOCKSTEP_ON_TIMEOUT_RAISE : LOCKSTEP_ON_TIMEOUT_END;
        }
        if (timed_out != nullptr) *timed_out = c.timed_out() ? 1 : 0;
    });
}

lockstep_status_t lockstep_comm_get_progress_thread(lockstep_comm_t comm, int32_t* on) {
    return guarded(comm, [&] {
        require_out(on, "on");
        *on = communicator(comm, "lockstep_comm_get_progress_thread").progress_thread() ? 1 : 0;
    });
}

lockstep_status_t lockstep_comm_free(lockstep_comm_t comm) {
    return guarded(nullptr, [&] {
        if (comm == nullptr) return;
        if (!forget_comm_handle(comm)) {
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 "lockstep_comm_free: comm is not a live communicator handle (freed already, or never made by "
                 "lockstep)");
        }
        std::unique_ptr<lockstep_comm_s> handle(comm);
        handle->owned.reset();
    });
}

lockstep_status_t lockstep_comm_rank(lockstep_comm_t comm, int32_t* rank) {
    return guarded(comm, [&] {
        require_out(rank, "rank");
        *rank = communicator(comm, "lockstep_comm_rank").rank();
    });
}

lockstep_status_t lockstep_comm_size(lockstep_comm_t comm, int32_t* size) {
    return guarded(comm, [&] {
        require_out(size, "size");
        *size = communicator(comm, "lockstep_comm_size").size();
    });
}

lockstep_status_t lockstep_comm_fortran_handle(lockstep_comm_t comm, int64_t* fortran_handle) {
    return guarded(comm, [&] {
        require_out(fortran_handle, "fortran_handle");
        *fortran_handle =
            static_cast<int64_t>(MPI_Comm_c2f(communicator(comm, "lockstep_comm_fortran_handle").mpi_comm()));
    });
}

lockstep_status_t lockstep_comm_set_debug(lockstep_comm_t comm, int32_t on) {
    return guarded(comm, [&] { communicator(comm, "lockstep_comm_set_debug").set_debug(on != 0); });
}

lockstep_status_t lockstep_comm_get_debug(lockstep_comm_t comm, int32_t* on) {
    return guarded(comm, [&] {
        require_out(on, "on");
        *on = communicator(comm, "lockstep_comm_get_debug").debug() ? 1 : 0;
    });
}

lockstep_status_t lockstep_comm_get_timeout(lockstep_comm_t comm, double* seconds) {
    return guarded(comm, [&] {
        require_out(seconds, "seconds");
        *seconds = communicator(comm, "lockstep_comm_get_timeout").timeout();
    });
}

lockstep_status_t lockstep_comm_set_step(lockstep_comm_t comm, uint64_t step) {
    return guarded(comm, [&] { communicator(comm, "lockstep_comm_set_step").set_step(step); });
}

lockstep_status_t lockstep_comm_get_async_error(lockstep_comm_t comm, const char** text) {
    // Not through guarded: the verdict is a status of its own, not an error of this call.
    static thread_local std::string verdict;
    lockstep_status_t status = LOCKSTEP_OK;
    const lockstep_status_t rc = guarded(comm, [&] {
        std::optional<std::string> v = communicator(comm, "lockstep_comm_get_async_error").async_error();
        verdict = v.value_or("");
        status = v ? LOCKSTEP_ERROR_TIMEOUT : LOCKSTEP_OK;
    });
    if (rc != LOCKSTEP_OK) return rc;
    if (text != nullptr) *text = verdict.c_str();
    return status;
}

const char* lockstep_comm_last_error(lockstep_comm_t comm) {
    if (!is_live(comm)) return "";
    // A copy for this thread: another thread may replace the communicator's text at any time.
    static thread_local std::string copy;
    try {
        std::scoped_lock lock(comm->error_mutex);
        copy = comm->last_error;
    } catch (...) {
        return "";
    }
    return copy.c_str();
}

lockstep_status_t lockstep_comm_abort(lockstep_comm_t comm, int32_t code, const char* reason) {
    return guarded(comm, [&] {
        Communicator& c = communicator(comm, "lockstep_comm_abort");
        std::fprintf(stderr, "lockstep: process %d aborts the job (exit code %d)%s%s\n", c.rank(), code,
                     reason != nullptr ? ": " : "", reason != nullptr ? reason : "");
        std::fflush(stderr);
        LOCKSTEP_MPI_CHECK(MPI_Abort(c.mpi_comm(), code));
    });
}

// ---------------------------------------------------------------- collectives

lockstep_status_t lockstep_barrier(lockstep_comm_t comm, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        Communicator& c = communicator(comm, "lockstep_barrier");
        c.barrier(begin_call(c, options, "lockstep_barrier", OpKind::Barrier, nullptr, -1, std::nullopt));
    });
}

lockstep_status_t lockstep_broadcast(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                     int32_t root, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_broadcast";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const Tensor* described = a.out != nullptr ? a.out : a.in;
        const CallSite site = begin_call(c, options, entry, OpKind::Broadcast, described, root, std::nullopt);
        const bool is_root = c.rank() == root;
        Call call{c, OpKind::Broadcast, described, root, std::nullopt, site};
        call([&] { check_broadcast(a, is_root, entry); },
             [&] {
                 if (is_root && !a.in_place()) ops::copy_(*a.out, *a.in);
                 c.broadcast_(*a.out, root, site);
             });
    });
}

lockstep_status_t lockstep_reduce(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                  lockstep_reduce_op_t op, int32_t root, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_reduce";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const std::optional<ReduceOp> rop = reduce_op_of(op);
        const CallSite site = begin_call(c, options, entry, OpKind::Reduce, a.in, root, rop);
        const bool is_root = c.rank() == root;
        Call call{c, OpKind::Reduce, a.in, root, rop, site};
        call([&] { check_reduce(a, rop, op, is_root, entry); },
             [&] {
                 Tensor result = c.reduce(*a.in, reduction(*rop, options), root, site);
                 if (is_root) ops::copy_(*a.out, result);
             });
    });
}

lockstep_status_t lockstep_allreduce(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                     lockstep_reduce_op_t op, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_allreduce";
        Communicator& c = communicator(comm, entry);
        Tensor* in = live_tensor(input);
        const std::optional<ReduceOp> rop = reduce_op_of(op);
        const CallSite site = begin_call(c, options, entry, OpKind::Allreduce, in, -1, rop);
        if (in != nullptr && output == input && rop) {  // the common case: no check of this layer's own
            c.allreduce_(*in, reduction(*rop, options), site);
            return;
        }
        const Tensors a(input, output);
        Call call{c, OpKind::Allreduce, in, -1, rop, site};
        call([&] { check_allreduce(a, rop, op, entry); },
             [&] {
                 ops::copy_(*a.out, *a.in);
                 c.allreduce_(*a.out, reduction(*rop, options), site);
             });
    });
}

lockstep_status_t lockstep_gather(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output, int32_t root,
                                  const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_gather";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const CallSite site = begin_call(c, options, entry, OpKind::Gather, a.in, root, std::nullopt);
        const bool is_root = c.rank() == root;
        Call call{c, OpKind::Gather, a.in, root, std::nullopt, site};
        call([&] { check_gather(a, is_root, c.size(), entry); },
             [&] {
                 Tensor result = c.gather(*a.in, root, site);
                 if (is_root) ops::copy_(*a.out, result);
             });
    });
}

lockstep_status_t lockstep_allgather(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                     const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_allgather";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const CallSite site = begin_call(c, options, entry, OpKind::Allgather, a.in, -1, std::nullopt);
        Call call{c, OpKind::Allgather, a.in, -1, std::nullopt, site};
        call([&] { check_allgather(a, entry); }, [&] { c.allgather_into(*a.in, *a.out, site); });
    });
}

lockstep_status_t lockstep_scatter(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                   int32_t root, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_scatter";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const CallSite site = begin_call(c, options, entry, OpKind::Scatter, a.in, root, std::nullopt);
        const bool is_root = c.rank() == root;
        Tensor placeholder;
        const Tensor* in = a.in;
        Call call{c, OpKind::Scatter, a.in, root, std::nullopt, site};
        call(
            [&] {
                in = check_scatter(a, is_root, c.size(), placeholder, entry);
                call.input = in;
            },
            [&] {
                Tensor result = c.scatter(*in, root, site);
                ops::copy_(*a.out, result);
            });
    });
}

lockstep_status_t lockstep_reduce_scatter(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                          lockstep_reduce_op_t op, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_reduce_scatter";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const std::optional<ReduceOp> rop = reduce_op_of(op);
        const CallSite site = begin_call(c, options, entry, OpKind::ReduceScatter, a.in, -1, rop);
        Call call{c, OpKind::ReduceScatter, a.in, -1, rop, site};
        call([&] { check_reduce_scatter(a, rop, op, c.size(), entry); },
             [&] {
                 if (half_type(a.in)) {
                     Tensor result = c.reduce_scatter(*a.in, reduction(*rop, options), site);
                     ops::copy_(*a.out, result);
                 } else {
                     c.reduce_scatter_into(*a.in, *a.out, reduction(*rop, options), site);
                 }
             });
    });
}

lockstep_status_t lockstep_alltoall(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                    const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_alltoall";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const CallSite site = begin_call(c, options, entry, OpKind::Alltoall, a.in, -1, std::nullopt);
        Call call{c, OpKind::Alltoall, a.in, -1, std::nullopt, site};
        call([&] { check_alltoall(a, entry); },
             [&] {
                 Tensor result = c.alltoall(*a.in, site);
                 ops::copy_(*a.out, result);
             });
    });
}

lockstep_status_t lockstep_alltoallv(lockstep_comm_t comm, lockstep_tensor_t input, const int64_t* send_counts,
                                     lockstep_tensor_t output, const int64_t* recv_counts,
                                     const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_alltoallv";
        Communicator& c = communicator(comm, entry);
        const Tensors a(input, output);
        const CallSite site = begin_call(c, options, entry, OpKind::Alltoallv, a.in, -1, std::nullopt);
        Call call{c, OpKind::Alltoallv, a.in, -1, std::nullopt, site};
        AlltoallvCounts counts;
        call([&] { counts = check_alltoallv(a, send_counts, recv_counts, c.size(), entry); },
             [&] { c.alltoallv_into(*a.in, counts.send, *a.out, counts.recv, site); });
    });
}

lockstep_status_t lockstep_gather_uneven(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t* result,
                                         const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_gather_uneven";
        Communicator& c = communicator(comm, entry);
        const Tensor* in = live_tensor(input);
        const CallSite site = begin_call(c, options, entry, OpKind::GatherUneven, in, -1, std::nullopt);
        Call call{c, OpKind::GatherUneven, in, -1, std::nullopt, site};
        Tensor gathered;
        call(
            [&] {
                check_tensor(in, input, entry, "input");
                if (result == nullptr) throw InvalidArgumentError("lockstep_gather_uneven: result is NULL");
            },
            [&] { gathered = c.gather_uneven(*in, site); });
        *result = new_tensor_handle(std::move(gathered));
    });
}

// ---------------------------------------------------------------- non-blocking collectives
// Each checks what its blocking form checks, and issues the C++ non-blocking form that writes the caller's output
// (in place, or into it); where there is none (the result is a new tensor), the request copies the result into the
// output when it is seen complete (request_c.cpp). A copy of the input into the output happens at issue.

lockstep_status_t lockstep_ibarrier(lockstep_comm_t comm, const lockstep_call_options_t* options,
                                    lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ibarrier";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        NonBlockingCall call{c, comm, entry, OpKind::Barrier};
        call(
            options, request, [] {}, [&](const CallSite& site, lockstep_request_s& r) { r.work = c.ibarrier(site); });
    });
}

lockstep_status_t lockstep_ibroadcast(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                      int32_t root, const lockstep_call_options_t* options,
                                      lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ibroadcast";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        const bool is_root = c.rank() == root;
        NonBlockingCall call{c, comm, entry, OpKind::Broadcast, a.out != nullptr ? a.out : a.in, root};
        call(
            options, request,
            [&] {
                check_broadcast(a, is_root, entry);
                if (is_root && !a.in_place()) ops::copy_(*a.out, *a.in);
            },
            [&](const CallSite& site, lockstep_request_s& r) { r.work = c.ibroadcast_(*a.out, root, site); });
    });
}

lockstep_status_t lockstep_ireduce(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                   lockstep_reduce_op_t op, int32_t root, const lockstep_call_options_t* options,
                                   lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ireduce";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        const std::optional<ReduceOp> rop = reduce_op_of(op);
        const bool is_root = c.rank() == root;
        NonBlockingCall call{c, comm, entry, OpKind::Reduce, a.in, root, rop};
        call(
            options, request, [&] { check_reduce(a, rop, op, is_root, entry); },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.ireduce(*a.in, reduction(*rop, options), root, site);
                if (is_root) r.finish = copy_into(*a.out);
            });
    });
}

lockstep_status_t lockstep_iallreduce(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                      lockstep_reduce_op_t op, const lockstep_call_options_t* options,
                                      lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_iallreduce";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        const std::optional<ReduceOp> rop = reduce_op_of(op);
        NonBlockingCall call{c, comm, entry, OpKind::Allreduce, a.in, -1, rop};
        call(
            options, request,
            [&] {
                check_allreduce(a, rop, op, entry);
                if (!a.in_place()) ops::copy_(*a.out, *a.in);
            },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.iallreduce_(*a.out, reduction(*rop, options), site);
            });
    });
}

lockstep_status_t lockstep_igather(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                   int32_t root, const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_igather";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        const bool is_root = c.rank() == root;
        NonBlockingCall call{c, comm, entry, OpKind::Gather, a.in, root};
        call(
            options, request, [&] { check_gather(a, is_root, c.size(), entry); },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.igather(*a.in, root, site);
                if (is_root) r.finish = copy_into(*a.out);
            });
    });
}

lockstep_status_t lockstep_iallgather(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                      const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_iallgather";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        NonBlockingCall call{c, comm, entry, OpKind::Allgather, a.in};
        call(
            options, request, [&] { check_allgather(a, entry); },
            [&](const CallSite& site, lockstep_request_s& r) { r.work = c.iallgather_into(*a.in, *a.out, site); });
    });
}

lockstep_status_t lockstep_iscatter(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                    int32_t root, const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_iscatter";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        const bool is_root = c.rank() == root;
        Tensor placeholder;
        const Tensor* in = a.in;
        NonBlockingCall call{c, comm, entry, OpKind::Scatter, a.in, root};
        call(
            options, request,
            [&] {
                in = check_scatter(a, is_root, c.size(), placeholder, entry);
                call.input = in;
            },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.iscatter(*in, root, site);
                r.finish = copy_into(*a.out);
            });
    });
}

lockstep_status_t lockstep_ireduce_scatter(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                           lockstep_reduce_op_t op, const lockstep_call_options_t* options,
                                           lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ireduce_scatter";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        const std::optional<ReduceOp> rop = reduce_op_of(op);
        NonBlockingCall call{c, comm, entry, OpKind::ReduceScatter, a.in, -1, rop};
        call(
            options, request, [&] { check_reduce_scatter(a, rop, op, c.size(), entry); },
            [&](const CallSite& site, lockstep_request_s& r) {
                if (half_type(a.in)) {
                    r.work = c.ireduce_scatter(*a.in, reduction(*rop, options), site);
                    r.finish = copy_into(*a.out);
                } else {
                    r.work = c.ireduce_scatter_into(*a.in, *a.out, reduction(*rop, options), site);
                }
            });
    });
}

lockstep_status_t lockstep_ialltoall(lockstep_comm_t comm, lockstep_tensor_t input, lockstep_tensor_t output,
                                     const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ialltoall";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        NonBlockingCall call{c, comm, entry, OpKind::Alltoall, a.in};
        call(
            options, request, [&] { check_alltoall(a, entry); },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.ialltoall(*a.in, site);
                r.finish = copy_into(*a.out);
            });
    });
}

lockstep_status_t lockstep_ialltoallv(lockstep_comm_t comm, lockstep_tensor_t input, const int64_t* send_counts,
                                      lockstep_tensor_t output, const int64_t* recv_counts,
                                      const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ialltoallv";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensors a(input, output);
        NonBlockingCall call{c, comm, entry, OpKind::Alltoallv, a.in};
        AlltoallvCounts counts;
        call(
            options, request, [&] { counts = check_alltoallv(a, send_counts, recv_counts, c.size(), entry); },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.ialltoallv_into(*a.in, counts.send, *a.out, counts.recv, site);
            });
    });
}

lockstep_status_t lockstep_igather_uneven(lockstep_comm_t comm, lockstep_tensor_t input,
                                          const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_igather_uneven";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const Tensor* in = live_tensor(input);
        NonBlockingCall call{c, comm, entry, OpKind::GatherUneven, in};
        call(
            options, request, [&] { check_tensor(in, input, entry, "input"); },
            [&](const CallSite& site, lockstep_request_s& r) {
                r.work = c.igather_uneven(*in, site);
                r.gives_result = true;
            });
    });
}

lockstep_status_t lockstep_reject_call(lockstep_comm_t comm, lockstep_collective_t collective, int32_t root,
                                       lockstep_reduce_op_t reduce_op, const char* message,
                                       const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_reject_call";
        const OpKind op = rejected_operation(collective, entry);
        Communicator& c = communicator(comm, entry);
        const CallSite site = begin_call(c, options, entry, op, nullptr, root, std::nullopt);
        c.reject_call(op, nullptr, root, rejected_reduce_op(op, reduce_op), rejection(message), site);
    });
}

lockstep_status_t lockstep_ireject_call(lockstep_comm_t comm, lockstep_collective_t collective, int32_t root,
                                        lockstep_reduce_op_t reduce_op, const char* message,
                                        const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_ireject_call";
        Communicator& c = nonblocking_communicator(comm, entry, request);
        const OpKind op = rejected_operation(collective, entry);
        NonBlockingCall call{c, comm, entry, op, nullptr, root, rejected_reduce_op(op, reduce_op)};
        // The check that always fails: the request is the rejection.
        call(
            options, request, [&] { std::rethrow_exception(rejection(message)); },
            [](const CallSite&, lockstep_request_s&) {});
    });
}

const char* lockstep_collective_name(lockstep_collective_t collective) {
    const std::optional<OpKind> op = operation_of(collective);
    if (!op) return nullptr;
    // The table's names are literals ("lockstep::allreduce"): the part after the namespace ends with their NUL.
    constexpr std::string_view prefix = "lockstep::";
    std::string_view name = operation_info(*op).name;
    if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
    return name.data();
}

const char* lockstep_reduce_op_name(lockstep_reduce_op_t op) {
    const std::optional<ReduceOp> reduce_op = reduce_op_of(op);
    return reduce_op ? reduce_op_name(*reduce_op).data() : nullptr;
}

lockstep_status_t lockstep_send(lockstep_comm_t comm, lockstep_tensor_t tensor, int32_t dest, int32_t tag,
                                const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        lockstep_call_options_t o;
        const CallSite site = call_site(options, "lockstep_send", &o);
        wait_for_stream(o.cuda_stream);
        communicator(comm, "lockstep_send").send(c_api::tensor(tensor, "lockstep_send", "tensor"), dest, tag, site);
    });
}

lockstep_status_t lockstep_recv(lockstep_comm_t comm, lockstep_tensor_t output, int32_t source, int32_t tag,
                                int32_t* actual_source, const lockstep_call_options_t* options) {
    return guarded(comm, [&] {
        lockstep_call_options_t o;
        const CallSite site = call_site(options, "lockstep_recv", &o);
        wait_for_stream(o.cuda_stream);
        Communicator& c = communicator(comm, "lockstep_recv");
        Tensor& out = c_api::tensor(output, "lockstep_recv", "output");
        int from = source;
        if (source == LOCKSTEP_ANY_SOURCE) {
            from = c.recv_any(out, tag, site);
        } else {
            c.recv(out, source, tag, site);
        }
        if (actual_source != nullptr) *actual_source = from;
    });
}

lockstep_status_t lockstep_isend(lockstep_comm_t comm, lockstep_tensor_t tensor, int32_t dest, int32_t tag,
                                 const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_isend";
        require_out(request, "request");
        *request = nullptr;
        const CallSite site = nonblocking_call_site(options, entry);
        Communicator& c = communicator(comm, entry);
        const Tensor& t = c_api::tensor(tensor, entry, "tensor");
        NewRequestHandle r;
        r->comm = comm;
        r->work = c.isend(t, dest, tag, site);
        *request = r.release();
    });
}

lockstep_status_t lockstep_irecv(lockstep_comm_t comm, lockstep_tensor_t output, int32_t source, int32_t tag,
                                 const lockstep_call_options_t* options, lockstep_request_t* request) {
    return guarded(comm, [&] {
        constexpr const char* entry = "lockstep_irecv";
        require_out(request, "request");
        *request = nullptr;
        const CallSite site = nonblocking_call_site(options, entry);
        Communicator& c = communicator(comm, entry);
        Tensor& out = c_api::tensor(output, entry, "output");
        NewRequestHandle r;
        r->comm = comm;
        r->work = source == LOCKSTEP_ANY_SOURCE ? c.irecv_any(out, tag, site) : c.irecv(out, source, tag, site);
        *request = r.release();
    });
}

}  // extern "C"
