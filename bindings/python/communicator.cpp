#include "communicator.hpp"

#include "call_site.hpp"
#include "collective_call.hpp"
#include "conversion.hpp"
#include "operand.hpp"
#include "request.hpp"
#include "tensor.hpp"

#include <pybind11/stl.h>

#include <cctype>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lockstep_python {

Communicator& to_communicator(py::handle value, const Argument& where) {
    if (!py::isinstance<Communicator>(value)) raise_type(value, where, "a lockstep.Communicator");
    return value.cast<Communicator&>();
}

namespace {

py::object world_communicator() {
    ensure_init();
    if (g_world != nullptr && py::handle(g_world).cast<const Communicator&>().freed()) {
        Py_DECREF(g_world);  // the caller freed the world handle: a new one
        g_world = nullptr;
    }
    if (g_world == nullptr) {
        lockstep_comm_t handle = nullptr;
        check(lockstep_comm_world(&handle));
        g_world = py::cast(Communicator(handle)).release().ptr();
    }
    return py::reinterpret_borrow<py::object>(g_world);
}

py::object communicator_or_none(lockstep_comm_t handle) {
    if (handle == nullptr) return py::none();
    return py::cast(Communicator(handle));
}

lockstep_comm_options_t comm_options(const char* function, const py::object& debug, const py::object& timeout,
                                     const py::object& shared_memory, const py::object& on_timeout) {
    lockstep_comm_options_t options = LOCKSTEP_COMM_OPTIONS_INIT;
    if (const auto on = to_optional_bool(debug, {function, "debug"})) options.debug = *on ? 1 : 0;
    if (const auto seconds = to_optional_double(timeout, {function, "timeout"})) {
        if (!(*seconds >= 0.0)) {
            raise_python(PyExc_ValueError, std::string(function) +
                                               ": timeout must be a number of seconds >= 0 (0: no watchdog), got " +
                                               py::repr(timeout).cast<std::string>());
        }
        options.timeout = *seconds;
    }
    if (const auto on = to_optional_bool(shared_memory, {function, "shared_memory"}))
        options.shared_memory = *on ? 1 : 0;
    options.on_timeout = to_on_timeout(on_timeout, {function, "on_timeout"});
    return options;
}

// A communicator made from another (split, dup, create_group) by `make`, the GIL released meanwhile.
template <typename Make>
py::object derived_communicator(const lockstep_comm_options_t& options, Make&& make) {
    lockstep_comm_t out = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = make(&options, &out);
    }
    check(status);
    return communicator_or_none(out);
}

py::object communicator_from_fortran(const char* function, int64_t fortran_handle, const py::object& debug,
                                     const py::object& timeout, const py::object& shared_memory,
                                     const py::object& on_timeout) {
    ensure_init();
    const lockstep_comm_options_t options = comm_options(function, debug, timeout, shared_memory, on_timeout);
    lockstep_comm_t handle = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_comm_from_fortran(fortran_handle, &options, &handle);
    }
    check(status);
    return communicator_or_none(handle);
}

// The shape [size * d0, ...] of a gather's result (a 0-d input gives [size]).
std::vector<int64_t> gathered_shape(const Tensor& input, int32_t size) {
    std::vector<int64_t> shape = input.shape();
    if (shape.empty()) return {size};
    shape[0] *= size;
    return shape;
}

// The output of a collective that allocates one when the caller gives none: the caller's `out` when it is not None;
// else, where `allocate` (this rank receives a result), a new tensor of shape_of(input) with the input's dtype and
// device; else no output.
class Output {
public:
    template <typename ShapeOf>
    Output(const py::object& out, lockstep_tensor_t input, bool allocate, ShapeOf&& shape_of) : out_(out) {
        if (!out.is_none()) {
            given_ = to_operand(out, false);
            handle_ = given_.handle;
        } else if (allocate) {
            Tensor in = borrow(input);
            Tensor created = empty_tensor(shape_of(in), in.dtype(), in.device());
            handle_ = created.handle();
            created_ = py::cast(std::move(created));  // the object holds the tensor, and so the handle, alive
        }
    }
    lockstep_tensor_t handle() const { return handle_; }
    // What the collective returns: the new tensor, or the caller's out.
    py::object result() const { return created_ ? created_ : out_; }
    // A non-blocking call's: the output, held until the operation completes.
    void hold_in(Pending& pending) {
        pending.operands.push_back(std::move(given_));
        pending.objects.push_back(out_);
    }

private:
    py::object out_;
    Operand given_;
    py::object created_;
    lockstep_tensor_t handle_ = nullptr;
};

// What a non-blocking call hands to its Request: `result` (what the blocking call returns), the Python objects it was
// given and their operands.
template <typename... Operands>
Pending pending_of(py::object result, std::vector<py::object> objects, Operands&&... operands) {
    Pending pending;
    pending.result = std::move(result);
    pending.objects = std::move(objects);
    (pending.operands.push_back(std::move(operands)), ...);
    return pending;
}

}  // namespace

// Communicator.allreduce. The common call, comm.allreduce(array) on a buffer lockstep can take as it is, goes straight
// to the C call: pybind11's general argument handling costs about as much as a small allreduce. Anything else (other
// arguments, keywords, a DLPack object, a buffer that needs a rejection) takes the general path,
// Communicator._allreduce_general, which behaves the same.
// The Communicator of `self` without pybind11's type lookup (a Python subclass takes pybind11's way).
static const py::detail::type_info* g_communicator_type = nullptr;

static Communicator* communicator_of(PyObject* self) noexcept {
    if (g_communicator_type != nullptr && Py_TYPE(self) == g_communicator_type->type) {
        auto holder = reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder(g_communicator_type, false);
        return holder ? static_cast<Communicator*>(holder.value_ptr()) : nullptr;
    }
    try {
        return &py::cast<Communicator&>(py::handle(self));
    } catch (...) {
        return nullptr;
    }
}

extern "C" PyObject* communicator_allreduce(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                            PyObject* kwnames) {
    if (nargs == 1 && kwnames == nullptr && PyObject_CheckBuffer(args[0]) != 0) {
        Communicator* c = communicator_of(self);
        Py_buffer view;
        if (c != nullptr && c->usable() && PyObject_GetBuffer(args[0], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            const std::optional<lockstep_dtype_t> dtype = dtype_of_format(view.format, view.itemsize);
            lockstep_tensor_t handle = nullptr;
            if (dtype && view.ndim <= 8 && lockstep_is_initialized() != 0) {
                try {
                    handle = cached_handle(view, *dtype);
                } catch (...) {
                    handle = nullptr;
                }
            }
            if (handle != nullptr) {
                lockstep_status_t status;
                {
                    CallOptions options(std::nullopt, std::nullopt);
                    ++g_calls_entered;
                    PyThreadState* saved = PyEval_SaveThread();
                    status = lockstep_allreduce(c->usable_handle(), handle, handle, LOCKSTEP_SUM, options.get());
                    PyEval_RestoreThread(saved);
                }
                PyBuffer_Release(&view);
                if (status != LOCKSTEP_OK) {
                    set_python_error(StatusError{status, last_error_text(status)});
                    return nullptr;
                }
                Py_INCREF(args[0]);
                return args[0];
            }
            PyBuffer_Release(&view);
        } else if (c != nullptr && c->usable()) {
            PyErr_Clear();  // the general path asks again and reports the buffer's own error
        }
    }
    PyObject* general = PyObject_GetAttrString(self, "_allreduce_general");
    if (general == nullptr) return nullptr;
    PyObject* result = PyObject_Vectorcall(general, args, static_cast<size_t>(nargs), kwnames);
    Py_DECREF(general);
    return result;
}

PyMethodDef communicator_allreduce_def = {
    "allreduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&communicator_allreduce)),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce(x, op='sum', out=None, *, tag=None, stream=None, async_op=False, factor=None): the reduction of x over "
    "every rank, in place in x's memory (or into out); returns x (or out), or with async_op=True a lockstep.Request "
    "whose result() is x (or out). op='premul_sum' takes factor, this rank's multiplier of x before the sum."};

// premul_sum's factor: given with op="premul_sum" and only there (a factor with another op would be ignored silently).
double premul_factor(lockstep_reduce_op_t reduce_op, const py::object& factor, const char* function) {
    if (reduce_op != LOCKSTEP_PREMUL_SUM) {
        if (!factor.is_none()) {
            raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                         std::string(function) + ": factor is given, but op is not 'premul_sum'; pass op='premul_sum'");
        }
        return 1.0;
    }
    const double value = factor.is_none() ? -1.0 : PyFloat_AsDouble(factor.ptr());
    if (factor.is_none() || (value == -1.0 && PyErr_Occurred() != nullptr)) {
        PyErr_Clear();
        raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                     std::string(function) + ": op='premul_sum' needs factor=<a number> (this rank's multiplier)");
    }
    return value;
}

// The call options with premul_sum's factor set.
lockstep_call_options_t with_factor(const lockstep_call_options_t* o, double factor) {
    lockstep_call_options_t options = LOCKSTEP_CALL_OPTIONS_INIT;
    if (o != nullptr) options = *o;
    options.premul_factor = factor;
    return options;
}

void bind_communicator(py::module_& m) {
    py::class_<Communicator> comm(m, "Communicator", "A lockstep communicator: every collective runs on it.");
    comm.def_static("world", &world_communicator, "The communicator over every process of the runtime.")
        .def_static(
            "from_fortran",
            [](py::object handle, py::object debug, py::object timeout, py::object shared_memory,
               py::object on_timeout) {
                constexpr const char* where = "Communicator.from_fortran";
                return communicator_from_fortran(where, to_integer<int64_t>(handle, {where, "handle"}), debug, timeout,
                                                 shared_memory, on_timeout);
            },
            py::arg("handle"), py::kw_only(), py::arg("debug") = py::none(), py::arg("timeout") = py::none(),
            py::arg("shared_memory") = py::none(), py::arg("on_timeout") = py::none(),
            "A communicator over a duplicate of an MPI communicator given by its Fortran handle (collective).")
        .def_static(
            "from_mpi4py",
            [](py::object mpi4py_comm, py::object debug, py::object timeout, py::object shared_memory,
               py::object on_timeout) {
                // Comm.py2f() is MPI_Comm_c2f of mpi4py's handle, in the MPI that mpi4py and lockstep share.
                constexpr const char* where = "Communicator.from_mpi4py";
                ensure_init();
                if (!py::hasattr(mpi4py_comm, "py2f"))
                    raise_type(mpi4py_comm, {where, "comm"}, "an mpi4py communicator");
                const auto handle = to_integer<int64_t>(mpi4py_comm.attr("py2f")(), {where, "comm.py2f()"});
                return communicator_from_fortran(where, handle, debug, timeout, shared_memory, on_timeout);
            },
            py::arg("comm"), py::kw_only(), py::arg("debug") = py::none(), py::arg("timeout") = py::none(),
            py::arg("shared_memory") = py::none(), py::arg("on_timeout") = py::none(),
            "A communicator over a duplicate of an mpi4py communicator (collective over it).")
        .def_property_readonly("rank", &Communicator::rank, "This process's rank in the communicator.")
        .def_property_readonly("size", &Communicator::size, "The number of processes in the communicator.")
        .def_property_readonly("freed", &Communicator::freed,
                               "True once free() released the communicator or lockstep finalised.")
        .def_property(
            "debug",
            [](const Communicator& c) {
                int32_t on = 0;
                check(lockstep_comm_get_debug(c.handle(), &on));
                return on != 0;
            },
            [](Communicator& c, py::object on) {
                const bool value = to_bool(on, {"Communicator.debug", "the value"});
                check(lockstep_comm_set_debug(c.handle(), value ? 1 : 0));
            },
            "Debug mode on this communicator (bool, settable; set the same value on every rank): each collective first "
            "checks that every rank makes the same call and raises the same SignatureMismatchError on every rank "
            "otherwise. Raises TypeError for a value that is not a bool.")
        .def_property_readonly(
            "timeout",
            [](const Communicator& c) {
                double seconds = 0;
                check(lockstep_comm_get_timeout(c.handle(), &seconds));
                return seconds;
            },
            "The watchdog's limit for one operation on this communicator, in seconds.")
        .def_property_readonly(
            "fortran_handle",
            [](const Communicator& c) {
                int64_t handle = 0;
                check(lockstep_comm_fortran_handle(c.handle(), &handle));
                return handle;
            },
            "The MPI communicator's Fortran handle (MPI_Comm_c2f), for mpi4py's MPI.Comm.f2py or "
            "Fortran code.")
        .def_property_readonly("_handle", [](const Communicator& c) { return reinterpret_cast<uintptr_t>(c.handle()); })
        .def(
            "set_step",
            [](Communicator& c, py::object step) {
                const auto value = to_integer<uint64_t>(step, {"Communicator.set_step", "step"});
                check(lockstep_comm_set_step(c.handle(), value));
            },
            py::arg("step"),
            "Sets the loop step (an int >= 0; 0: none) that debug mode's signatures and reports carry for the calls "
            "that follow; no communication. Raises TypeError or OverflowError for another value.")
        .def_property_readonly(
            "on_timeout",
            [](const Communicator& c) {
                int32_t mode = 0;
                check(lockstep_comm_get_on_timeout(c.handle(), &mode, nullptr));
                return std::string(mode == LOCKSTEP_ON_TIMEOUT_RAISE ? "raise" : "end");
            },
            "What a collective that outlives the timeout does: \"end\" (the watchdog's report, then the job ends with "
            "exit code 124) or \"raise\" (lockstep.TimeoutError on the ranks that waited; the communicator is then "
            "broken).")
        .def_property_readonly(
            "timed_out",
            [](const Communicator& c) {
                int32_t timed_out = 0;
                check(lockstep_comm_get_on_timeout(c.handle(), nullptr, &timed_out));
                return timed_out != 0;
            },
            "True once a collective on this communicator timed out in raise mode: every call on it then raises "
            "lockstep.TimeoutError at once.")
        .def_property_readonly(
            "progress_thread",
            [](const Communicator& c) {
                int32_t on = 0;
                check(lockstep_comm_get_progress_thread(c.handle(), &on));
                return on != 0;
            },
            "True when this communicator's non-blocking collectives run on its progress thread; False when they run "
            "inside wait() and test() on the calling thread (the progress_thread setting is off, or MPI lacks "
            "MPI_THREAD_MULTIPLE).")
        .def(
            "split",
            [](Communicator& c, py::object color, py::object key_object, py::object timeout, py::object on_timeout) {
                const int32_t colour = to_optional_integer<int32_t>(color, {"Communicator.split", "color"})
                                           .value_or(LOCKSTEP_UNDEFINED_COLOR);
                const auto key = to_integer<int32_t>(key_object, {"Communicator.split", "key"});
                const lockstep_comm_t handle = c.handle();
                return derived_communicator(
                    comm_options("Communicator.split", py::none(), timeout, py::none(), on_timeout),
                    [&](const lockstep_comm_options_t* o, lockstep_comm_t* out) {
                        return lockstep_comm_split_with_options(handle, colour, key, o, out);
                    });
            },
            py::arg("color"), py::arg("key") = 0, py::kw_only(), py::arg("timeout") = py::none(),
            py::arg("on_timeout") = py::none(),
            "Collective: a new communicator per color, its ranks ordered by (key, rank), as MPI_Comm_split. A rank "
            "with color None (lockstep.UNDEFINED_COLOR) joins none and gets None. `timeout` (seconds; 0: no "
            "watchdog) and `on_timeout` (\"end\" or \"raise\") set the new communicator's watchdog; None takes this "
            "communicator's. Raises TypeError or OverflowError for arguments that are not such ints, ValueError for "
            "a bad timeout or on_timeout, ConfigError for \"raise\" without a progress thread, MpiError when MPI "
            "fails.")
        .def(
            "dup",
            [](Communicator& c, py::object timeout, py::object on_timeout) {
                const lockstep_comm_t handle = c.handle();
                return derived_communicator(
                    comm_options("Communicator.dup", py::none(), timeout, py::none(), on_timeout),
                    [&](const lockstep_comm_options_t* o, lockstep_comm_t* out) {
                        return lockstep_comm_dup_with_options(handle, o, out);
                    });
            },
            py::kw_only(), py::arg("timeout") = py::none(), py::arg("on_timeout") = py::none(),
            "Collective: a new communicator over the same processes with traffic of its own (MPI_Comm_dup). "
            "`timeout` (seconds; 0: no watchdog) and `on_timeout` (\"end\" or \"raise\") set its watchdog; None "
            "takes this communicator's. Raises ValueError for a bad timeout or on_timeout, ConfigError for \"raise\" "
            "without a progress thread, MpiError when MPI fails.")
        .def(
            "create_group",
            [](Communicator& c, py::object ranks_object, py::object tag_object, py::object timeout,
               py::object on_timeout) {
                const std::vector<int32_t> ranks =
                    to_integers<int32_t>(ranks_object, {"Communicator.create_group", "ranks"}, false);
                const auto tag = to_integer<int32_t>(tag_object, {"Communicator.create_group", "tag"});
                const lockstep_comm_t handle = c.handle();
                return derived_communicator(
                    comm_options("Communicator.create_group", py::none(), timeout, py::none(), on_timeout),
                    [&](const lockstep_comm_options_t* o, lockstep_comm_t* out) {
                        return lockstep_comm_create_group_with_options(handle, ranks.data(), ranks.size(), tag, o, out);
                    });
            },
            py::arg("ranks"), py::arg("tag") = 0, py::kw_only(), py::arg("timeout") = py::none(),
            py::arg("on_timeout") = py::none(),
            "Called by the members only, each with the same ranks and tag (MPI_Comm_create_group): a communicator over "
            "`ranks`, this communicator's ranks in the new one's order. `timeout` (seconds; 0: no watchdog) and "
            "`on_timeout` (\"end\" or \"raise\") set its watchdog; None takes this communicator's. Raises "
            "lockstep.Error for ranks it cannot use, TypeError or OverflowError for values that are not ints, "
            "ValueError for a bad timeout or on_timeout.")
        .def(
            "_reject",
            [](Communicator& c, py::object kind_object, py::object root_object, py::object message_object) {
                const std::string kind = to_string(kind_object, {"Communicator._reject", "kind"});
                const auto root = to_integer<int32_t>(root_object, {"Communicator._reject", "root"});
                const std::string message = to_string(message_object, {"Communicator._reject", "message"});
                // The collectives' names are the C library's (one table, collectives/).
                for (lockstep_collective_t v = 0; const char* name = lockstep_collective_name(v); ++v) {
                    if (kind == name) {
                        reject_conversion(c.handle(), v, root, message.c_str());
                        return;
                    }
                }
                raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                             "Communicator._reject: unknown collective '" + kind + "'");
            },
            py::arg("kind"), py::arg("root"), py::arg("message"),
            "Joins the collective `kind` as rejected (this rank cannot make it): in debug mode every rank raises the "
            "same CallRejectedError naming this rank and `message`; otherwise it returns and the caller raises its own "
            "error.")
        .def("free", &Communicator::free,
             "Releases the communicator (collective, as MPI_Comm_free); any later use raises InvalidUsageError.")
        .def(
            "async_error",
            [](Communicator& c) -> py::object {
                const char* text = nullptr;
                const lockstep_status_t status = lockstep_comm_get_async_error(c.handle(), &text);
                if (status == LOCKSTEP_OK) return py::none();
                if (status == LOCKSTEP_ERROR_TIMEOUT) return py::str(text != nullptr ? text : "");
                check(status);
                return py::none();
            },
            "The watchdog's report (a str) when an operation on this communicator outlived its timeout, else None; no "
            "communication.")
        .def(
            "last_error", [](Communicator& c) { return std::string(lockstep_comm_last_error(c.handle())); },
            "The message of the last error on this communicator, '' when there was none.")
        .def(
            "abort",
            [](Communicator& c, py::object code_object, py::object reason_object) {
                const auto code = to_integer<int32_t>(code_object, {"Communicator.abort", "code"});
                const auto reason = to_optional_string(reason_object, {"Communicator.abort", "reason"});
                lockstep_comm_t handle = c.handle();
                lockstep_status_t status;
                {
                    py::gil_scoped_release release;
                    status = lockstep_comm_abort(handle, code, reason ? reason->c_str() : nullptr);
                }
                check(status);
            },
            py::arg("code") = 1, py::arg("reason") = py::none(),
            "Ends every process of the job (MPI_Abort) with exit status `code` after logging `reason`; it does not "
            "return. Raises TypeError or OverflowError for a code that is not an int.")
        .def("__repr__",
             [](const Communicator& c) {
                 if (c.freed()) return std::string("lockstep.Communicator(freed)");
                 return "lockstep.Communicator(rank=" + std::to_string(c.rank()) +
                        ", size=" + std::to_string(c.size()) + ")";
             })
        // ------------------------------------------------------------ collectives
        // Each takes async_op: False runs the blocking C call; True issues its non-blocking form (lockstep_i*) and
        // returns a Request whose result() is what the blocking call returns. One lambda per collective calls either
        // form (`request` is null for the blocking one); it captures the operands' handles by value, since a Request
        // takes the operands themselves.
        .def(
            "barrier",
            [](Communicator& c, py::object tag, py::object stream, py::object async_op) -> py::object {
                return joined_call(c, LOCKSTEP_COLLECTIVE_BARRIER, -1, async_op, [&]() -> py::object {
                    const bool nonblocking = to_bool(async_op, {"Communicator.barrier", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    auto call = [handle](const lockstep_call_options_t* o, lockstep_request_t* request) {
                        return request != nullptr ? lockstep_ibarrier(handle, o, request) : lockstep_barrier(handle, o);
                    };
                    return run_or_issue(nonblocking, "Communicator.barrier", handle, tag, stream, Pending{}, call);
                });
            },
            py::kw_only(), py::arg("tag") = py::none(), py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Collective: returns once every rank called it; None. tag names the call in reports; stream is the CUDA "
            "stream of device tensors (an int or an object with cuda_stream). With async_op=True it returns at once a "
            "lockstep.Request whose result() is that value, and its errors are raised at the Request's wait. Raises "
            "SignatureMismatchError or CallRejectedError (debug mode, on every rank), ShapeError, DTypeError, "
            "DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a bad root or op), TypeError (an "
            "argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "broadcast",
            [](Communicator& c, py::object x, py::object root_object, py::object tag, py::object stream,
               py::object async_op) {
                int32_t root = -1;
                return joined_call(c, LOCKSTEP_COLLECTIVE_BROADCAST, root, async_op, [&]() -> py::object {
                    root = to_integer<int32_t>(root_object, {"Communicator.broadcast", "root"});
                    const bool nonblocking = to_bool(async_op, {"Communicator.broadcast", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    Operand t = to_operand(x, false);
                    auto call = [handle, tensor = t.handle, root](const lockstep_call_options_t* o,
                                                                  lockstep_request_t* request) {
                        return request != nullptr ? lockstep_ibroadcast(handle, tensor, tensor, root, o, request)
                                                  : lockstep_broadcast(handle, tensor, tensor, root, o);
                    };
                    return run_or_issue(nonblocking, "Communicator.broadcast", handle, tag, stream,
                                        pending_of(x, {x}, std::move(t)), call);
                });
            },
            py::arg("x"), py::arg("root") = 0, py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Collective: x of rank `root` to every rank, in place in x's memory; returns x. tag names the call in "
            "reports; stream is the CUDA stream of device tensors (an int or an object with cuda_stream). With "
            "async_op=True it returns at once a lockstep.Request whose result() is that value, and its errors are "
            "raised at the Request's wait. Raises SignatureMismatchError or CallRejectedError (debug mode, on every "
            "rank), ShapeError, DTypeError, DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a "
            "bad root or op), TypeError (an argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "_allreduce_general",
            [](Communicator& c, py::object x, py::object op, py::object out, py::object tag, py::object stream,
               py::object async_op, py::object factor_object) {
                return joined_call(c, LOCKSTEP_COLLECTIVE_ALLREDUCE, -1, async_op, [&]() -> py::object {
                    const bool nonblocking = to_bool(async_op, {"Communicator.allreduce", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    const lockstep_reduce_op_t reduce_op = parse_op(op, "Communicator.allreduce");
                    const double factor = premul_factor(reduce_op, factor_object, "Communicator.allreduce");
                    Operand input = to_operand(x, false);
                    Operand output = out.is_none() ? Operand{input.handle, std::nullopt} : to_operand(out, false);
                    auto call = [handle, in = input.handle, into = output.handle, reduce_op, factor](
                                    const lockstep_call_options_t* o, lockstep_request_t* request) {
                        const lockstep_call_options_t with = with_factor(o, factor);
                        return request != nullptr ? lockstep_iallreduce(handle, in, into, reduce_op, &with, request)
                                                  : lockstep_allreduce(handle, in, into, reduce_op, &with);
                    };
                    py::object result = out.is_none() ? x : out;
                    return run_or_issue(nonblocking, "Communicator.allreduce", handle, tag, stream,
                                        pending_of(result, {x, out}, std::move(input), std::move(output)), call);
                });
            },
            py::arg("x"), py::arg("op") = "sum", py::arg("out") = py::none(), py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none(), py::arg("async_op") = false,
            py::arg("factor") = py::none())
        .def(
            "reduce",
            [](Communicator& c, py::object x, py::object root_object, py::object op, py::object out, py::object tag,
               py::object stream, py::object async_op, py::object factor_object) {
                int32_t root = -1;
                return joined_call(c, LOCKSTEP_COLLECTIVE_REDUCE, root, async_op, [&]() -> py::object {
                    root = to_integer<int32_t>(root_object, {"Communicator.reduce", "root"});
                    const bool nonblocking = to_bool(async_op, {"Communicator.reduce", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    const lockstep_reduce_op_t reduce_op = parse_op(op, "Communicator.reduce");
                    const double factor = premul_factor(reduce_op, factor_object, "Communicator.reduce");
                    Operand input = to_operand(x, false);
                    Operand output = out.is_none() ? Operand{input.handle, std::nullopt} : to_operand(out, false);
                    auto call = [handle, in = input.handle, into = output.handle, reduce_op, root, factor](
                                    const lockstep_call_options_t* o, lockstep_request_t* request) {
                        const lockstep_call_options_t with = with_factor(o, factor);
                        return request != nullptr ? lockstep_ireduce(handle, in, into, reduce_op, root, &with, request)
                                                  : lockstep_reduce(handle, in, into, reduce_op, root, &with);
                    };
                    py::object result = out.is_none() ? x : out;
                    return run_or_issue(nonblocking, "Communicator.reduce", handle, tag, stream,
                                        pending_of(result, {x, out}, std::move(input), std::move(output)), call);
                });
            },
            py::arg("x"), py::arg("root") = 0, py::arg("op") = "sum", py::arg("out") = py::none(), py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none(), py::arg("async_op") = false,
            py::arg("factor") = py::none(),
            "Collective: the reduction of x over every rank (op as allreduce's: 'premul_sum' takes factor) on rank "
            "`root`, in place in x's memory or into out; returns x (or out). tag names the call in reports; stream is "
            "the CUDA "
            "stream of device tensors (an int or an object with cuda_stream). With async_op=True it returns at once a "
            "lockstep.Request whose result() is that value, and its errors are raised at the Request's wait. Raises "
            "SignatureMismatchError or CallRejectedError (debug mode, on every rank), ShapeError, DTypeError, "
            "DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a bad root or op), TypeError (an "
            "argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "allgather",
            [](Communicator& c, py::object x, py::object out, py::object tag, py::object stream,
               py::object async_op) -> py::object {
                return joined_call(c, LOCKSTEP_COLLECTIVE_ALLGATHER, -1, async_op, [&]() -> py::object {
                    const bool nonblocking = to_bool(async_op, {"Communicator.allgather", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    Output output(out, input.handle, true,
                                  [&](const Tensor& in) { return gathered_shape(in, c.size()); });
                    auto call = [handle, in = input.handle, into = output.handle()](const lockstep_call_options_t* o,
                                                                                    lockstep_request_t* request) {
                        return request != nullptr ? lockstep_iallgather(handle, in, into, o, request)
                                                  : lockstep_allgather(handle, in, into, o);
                    };
                    Pending pending = pending_of(output.result(), {x}, std::move(input));
                    output.hold_in(pending);
                    return run_or_issue(nonblocking, "Communicator.allgather", handle, tag, stream, std::move(pending),
                                        call);
                });
            },
            py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Collective: every rank's x, concatenated along a new first dimension (rank order), on every rank: into "
            "out, or a new lockstep.Tensor; returns it. tag names the call in reports; stream is the CUDA stream of "
            "device tensors (an int or an object with cuda_stream). With async_op=True it returns at once a "
            "lockstep.Request whose result() is that value, and its errors are raised at the Request's wait. Raises "
            "SignatureMismatchError or CallRejectedError (debug mode, on every rank), ShapeError, DTypeError, "
            "DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a bad root or op), TypeError (an "
            "argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "gather",
            [](Communicator& c, py::object x, py::object root_object, py::object out, py::object tag, py::object stream,
               py::object async_op) -> py::object {
                int32_t root = -1;
                return joined_call(c, LOCKSTEP_COLLECTIVE_GATHER, root, async_op, [&]() -> py::object {
                    root = to_integer<int32_t>(root_object, {"Communicator.gather", "root"});
                    const bool nonblocking = to_bool(async_op, {"Communicator.gather", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    const bool is_root = c.rank() == root;
                    Operand input = to_operand(x, false);
                    // A given output is also a non-root's: every rank checks a given output alike.
                    Output output(out, input.handle, is_root,
                                  [&](const Tensor& in) { return gathered_shape(in, c.size()); });
                    auto call = [handle, in = input.handle, into = output.handle(), root](
                                    const lockstep_call_options_t* o, lockstep_request_t* request) {
                        return request != nullptr ? lockstep_igather(handle, in, into, root, o, request)
                                                  : lockstep_gather(handle, in, into, root, o);
                    };
                    py::object result = is_root ? output.result() : py::none();
                    Pending pending = pending_of(result, {x}, std::move(input));
                    output.hold_in(pending);
                    return run_or_issue(nonblocking, "Communicator.gather", handle, tag, stream, std::move(pending),
                                        call);
                });
            },
            py::arg("x"), py::arg("root") = 0, py::arg("out") = py::none(), py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Collective: every rank's x, concatenated along a new first dimension (rank order), on rank `root`: into "
            "out, or a new lockstep.Tensor; returns it there and None on the other ranks. tag names the call in "
            "reports; stream is the CUDA stream of device tensors (an int or an object with cuda_stream). With "
            "async_op=True it returns at once a lockstep.Request whose result() is that value, and its errors are "
            "raised at the Request's wait. Raises SignatureMismatchError or CallRejectedError (debug mode, on every "
            "rank), ShapeError, DTypeError, DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a "
            "bad root or op), TypeError (an argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "scatter",
            [](Communicator& c, py::object x, py::object out, py::object root_object, py::object tag, py::object stream,
               py::object async_op) {
                int32_t root = -1;
                return joined_call(c, LOCKSTEP_COLLECTIVE_SCATTER, root, async_op, [&]() -> py::object {
                    root = to_integer<int32_t>(root_object, {"Communicator.scatter", "root"});
                    const bool nonblocking = to_bool(async_op, {"Communicator.scatter", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    Operand output = to_operand(out, false);
                    auto call = [handle, in = input.handle, into = output.handle, root](
                                    const lockstep_call_options_t* o, lockstep_request_t* request) {
                        return request != nullptr ? lockstep_iscatter(handle, in, into, root, o, request)
                                                  : lockstep_scatter(handle, in, into, root, o);
                    };
                    return run_or_issue(nonblocking, "Communicator.scatter", handle, tag, stream,
                                        pending_of(out, {x, out}, std::move(input), std::move(output)), call);
                });
            },
            py::arg("x"), py::arg("out"), py::arg("root") = 0, py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Collective: row i of rank `root`'s x (first dimension: one row per rank) into out of rank i; x is read on "
            "the root only (None elsewhere); returns out. tag names the call in reports; stream is the CUDA stream of "
            "device tensors (an int or an object with cuda_stream). With async_op=True it returns at once a "
            "lockstep.Request whose result() is that value, and its errors are raised at the Request's wait. Raises "
            "SignatureMismatchError or CallRejectedError (debug mode, on every rank), ShapeError, DTypeError, "
            "DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a bad root or op), TypeError (an "
            "argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "reduce_scatter",
            [](Communicator& c, py::object x, py::object out, py::object op, py::object tag, py::object stream,
               py::object async_op, py::object factor_object) -> py::object {
                return joined_call(c, LOCKSTEP_COLLECTIVE_REDUCE_SCATTER, -1, async_op, [&]() -> py::object {
                    const bool nonblocking = to_bool(async_op, {"Communicator.reduce_scatter", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    const lockstep_reduce_op_t reduce_op = parse_op(op, "Communicator.reduce_scatter");
                    const double factor = premul_factor(reduce_op, factor_object, "Communicator.reduce_scatter");
                    Operand input = to_operand(x, false);
                    Output output(out, input.handle, true, [&](const Tensor& in) {
                        std::vector<int64_t> shape = in.shape();
                        // A first dimension the size does not divide is left for the library to report, on every rank.
                        if (!shape.empty()) shape[0] /= c.size();
                        return shape;
                    });
                    auto call = [handle, in = input.handle, into = output.handle(), reduce_op, factor](
                                    const lockstep_call_options_t* o, lockstep_request_t* request) {
                        const lockstep_call_options_t with = with_factor(o, factor);
                        return request != nullptr
                                   ? lockstep_ireduce_scatter(handle, in, into, reduce_op, &with, request)
                                   : lockstep_reduce_scatter(handle, in, into, reduce_op, &with);
                    };
                    Pending pending = pending_of(output.result(), {x}, std::move(input));
                    output.hold_in(pending);
                    return run_or_issue(nonblocking, "Communicator.reduce_scatter", handle, tag, stream,
                                        std::move(pending), call);
                });
            },
            py::arg("x"), py::arg("out") = py::none(), py::arg("op") = "sum", py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none(), py::arg("async_op") = false,
            py::arg("factor") = py::none(),
            "Collective: the reduction of x over every rank (op as allreduce's: 'premul_sum' takes factor), split "
            "along "
            "the first dimension, row i to rank i: into out, or a new lockstep.Tensor; returns it. tag names the call "
            "in reports; stream is the CUDA stream of device tensors (an int or an object with cuda_stream). With "
            "async_op=True it returns at once a lockstep.Request whose result() is that value, and its errors are "
            "raised at the Request's wait. Raises SignatureMismatchError or CallRejectedError (debug mode, on every "
            "rank), ShapeError, DTypeError, DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a "
            "bad root or op), TypeError (an argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "alltoall",
            [](Communicator& c, py::object x, py::object out, py::object tag, py::object stream,
               py::object async_op) -> py::object {
                return joined_call(c, LOCKSTEP_COLLECTIVE_ALLTOALL, -1, async_op, [&]() -> py::object {
                    const bool nonblocking = to_bool(async_op, {"Communicator.alltoall", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    Output output(out, input.handle, true, [](const Tensor& in) { return in.shape(); });
                    auto call = [handle, in = input.handle, into = output.handle()](const lockstep_call_options_t* o,
                                                                                    lockstep_request_t* request) {
                        return request != nullptr ? lockstep_ialltoall(handle, in, into, o, request)
                                                  : lockstep_alltoall(handle, in, into, o);
                    };
                    Pending pending = pending_of(output.result(), {x}, std::move(input));
                    output.hold_in(pending);
                    return run_or_issue(nonblocking, "Communicator.alltoall", handle, tag, stream, std::move(pending),
                                        call);
                });
            },
            py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Collective: row j of rank i's x (first dimension: one row per rank) to row i of rank j's output: out, or "
            "a new lockstep.Tensor of x's shape; returns it. tag names the call in reports; stream is the CUDA stream "
            "of device tensors (an int or an object with cuda_stream). With async_op=True it returns at once a "
            "lockstep.Request whose result() is that value, and its errors are raised at the Request's wait. Raises "
            "SignatureMismatchError or CallRejectedError (debug mode, on every rank), ShapeError, DTypeError, "
            "DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a bad root or op), TypeError (an "
            "argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "alltoallv",
            [](Communicator& c, py::object x, py::object send_object, py::object recv_object, py::object out,
               py::object tag, py::object stream, py::object async_op) -> py::object {
                return joined_call(c, LOCKSTEP_COLLECTIVE_ALLTOALLV, -1, async_op, [&]() -> py::object {
                    constexpr const char* where = "Communicator.alltoallv";
                    const bool nonblocking = to_bool(async_op, {where, "async_op"});
                    lockstep_comm_t handle = c.handle();
                    std::vector<int64_t> send = to_integers<int64_t>(send_object, {where, "send_counts"}, false);
                    std::vector<int64_t> recv = to_integers<int64_t>(recv_object, {where, "recv_counts"}, false);
                    for (const auto* counts : {&send, &recv}) {
                        if (counts->size() != static_cast<std::size_t>(c.size())) {
                            raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                                         std::string(where) + ": " + (counts == &send ? "send_counts" : "recv_counts") +
                                             " has " + std::to_string(counts->size()) +
                                             " entries; it needs one per process (" + std::to_string(c.size()) + ")");
                        }
                    }
                    Operand input = to_operand(x, false);
                    Output output(out, input.handle, true, [&](const Tensor& in) {
                        std::vector<int64_t> shape = in.shape();
                        if (shape.empty()) shape.push_back(0);  // no rows: the library refuses the input
                        shape[0] = 0;
                        for (int64_t r : recv) shape[0] += std::max<int64_t>(r, 0);
                        return shape;
                    });
                    auto call = [handle, in = input.handle, into = output.handle(), send = std::move(send),
                                 recv = std::move(recv)](const lockstep_call_options_t* o,
                                                         lockstep_request_t* request) {
                        return request != nullptr
                                   ? lockstep_ialltoallv(handle, in, send.data(), into, recv.data(), o, request)
                                   : lockstep_alltoallv(handle, in, send.data(), into, recv.data(), o);
                    };
                    Pending pending = pending_of(output.result(), {x}, std::move(input));
                    output.hold_in(pending);
                    return run_or_issue(nonblocking, where, handle, tag, stream, std::move(pending), call);
                });
            },
            py::arg("x"), py::arg("send_counts"), py::arg("recv_counts"), py::arg("out") = py::none(), py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Uneven alltoall: rows of dimension 0 (x's first send_counts[0] rows to rank 0, the next send_counts[1] "
            "to rank 1, ...); the result, [sum(recv_counts), ...], holds recv_counts[j] rows from each rank j in "
            "rank order. Blocks may be empty. send_counts[j] here must equal recv_counts[i] on rank j (checked in "
            "debug mode). Returns the new tensor (or out), or with async_op=True a lockstep.Request.")
        .def(
            "gather_uneven",
            [](Communicator& c, py::object x, py::object tag, py::object stream, py::object async_op) {
                return joined_call(c, LOCKSTEP_COLLECTIVE_GATHER_UNEVEN, -1, async_op, [&]() -> py::object {
                    const bool nonblocking = to_bool(async_op, {"Communicator.gather_uneven", "async_op"});
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    if (nonblocking) {
                        const lockstep_tensor_t in = input.handle;
                        Pending pending = pending_of(py::none(), {x}, std::move(input));
                        pending.kind = RequestResult::NewTensor;
                        return issue_request(
                            "Communicator.gather_uneven", handle, tag, stream, std::move(pending),
                            [handle, in](const lockstep_call_options_t* o, lockstep_request_t* request) {
                                return lockstep_igather_uneven(handle, in, o, request);
                            });
                    }
                    lockstep_tensor_t result = nullptr;
                    run_collective("Communicator.gather_uneven", tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_gather_uneven(handle, input.handle, &result, o);
                    });
                    return py::cast(Tensor(result));
                });
            },
            py::arg("x"), py::kw_only(), py::arg("tag") = py::none(), py::arg("stream") = py::none(),
            py::arg("async_op") = false,
            "Collective: every rank's x concatenated along dimension 0, whose extent may differ between ranks, on "
            "every rank: a new lockstep.Tensor. tag names the call in reports; stream is the CUDA stream of device "
            "tensors (an int or an object with cuda_stream). With async_op=True it returns at once a lockstep.Request "
            "whose result() is that value, and its errors are raised at the Request's wait. Raises "
            "SignatureMismatchError or CallRejectedError (debug mode, on every rank), ShapeError, DTypeError, "
            "DeviceError, ReadOnlyError (a read-only target), InvalidArgumentError (a bad root or op), TypeError (an "
            "argument of the wrong type), TimeoutError or MpiError.")
        .def(
            "send",
            [](Communicator& c, py::object x, py::object dest_object, py::object tag_object, py::object name,
               py::object stream, py::object async_op) -> py::object {
                const auto dest = to_integer<int32_t>(dest_object, {"Communicator.send", "dest"});
                const auto tag = to_integer<int32_t>(tag_object, {"Communicator.send", "tag"});
                const bool nonblocking = to_bool(async_op, {"Communicator.send", "async_op"});
                lockstep_comm_t handle = c.handle();
                Operand t = to_operand(x, false);
                auto call = [handle, tensor = t.handle, dest, tag](const lockstep_call_options_t* o,
                                                                   lockstep_request_t* request) {
                    return request != nullptr ? lockstep_isend(handle, tensor, dest, tag, o, request)
                                              : lockstep_send(handle, tensor, dest, tag, o);
                };
                return run_or_issue(nonblocking, "Communicator.send", handle, name, stream,
                                    pending_of(py::none(), {x}, std::move(t)), call, "name");
            },
            py::arg("x"), py::arg("dest"), py::arg("tag") = 0, py::kw_only(), py::arg("name") = py::none(),
            py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Sends x to rank `dest` with the message tag `tag` (an int; `name` names the call in reports); returns "
            "None once x may be reused. stream is the CUDA stream of a device tensor. With async_op=True it returns at "
            "once a lockstep.Request (see isend). Raises InvalidArgumentError for a bad rank or tag, TypeError for an "
            "argument of the wrong type, MpiError or TimeoutError.")
        .def(
            "recv",
            [](Communicator& c, py::object x, py::object source_object, py::object tag_object, py::object name,
               py::object stream, py::object async_op) -> py::object {
                const auto source = to_integer<int32_t>(source_object, {"Communicator.recv", "source"});
                const auto tag = to_integer<int32_t>(tag_object, {"Communicator.recv", "tag"});
                const bool nonblocking = to_bool(async_op, {"Communicator.recv", "async_op"});
                lockstep_comm_t handle = c.handle();
                Operand t = to_operand(x, false);
                if (nonblocking) {
                    const lockstep_tensor_t target = t.handle;
                    Pending pending = pending_of(py::none(), {x}, std::move(t));
                    pending.kind = RequestResult::Source;
                    return issue_request(
                        "Communicator.recv", handle, name, stream, std::move(pending),
                        [handle, target, source, tag](const lockstep_call_options_t* o, lockstep_request_t* request) {
                            return lockstep_irecv(handle, target, source, tag, o, request);
                        },
                        "name");
                }
                int32_t actual = -1;
                run_collective(
                    "Communicator.recv", name, stream,
                    [&](const lockstep_call_options_t* o) {
                        return lockstep_recv(handle, t.handle, source, tag, &actual, o);
                    },
                    "name");
                return py::int_(actual);
            },
            py::arg("x"), py::arg("source") = LOCKSTEP_ANY_SOURCE, py::arg("tag") = 0, py::kw_only(),
            py::arg("name") = py::none(), py::arg("stream") = py::none(), py::arg("async_op") = false,
            "Receives into x a message of rank `source` (lockstep.ANY_SOURCE: any) with the tag `tag`; returns the "
            "sender's rank. `name` names the call in reports; stream is the CUDA stream of a device tensor. With "
            "async_op=True it returns at once a lockstep.Request whose result() and source give the sender (see "
            "irecv). Raises ShapeError or DTypeError for a message that does not fit x, InvalidArgumentError for a bad "
            "rank or tag, TypeError, MpiError or TimeoutError.");

    m.attr("UNDEFINED_COLOR") = LOCKSTEP_UNDEFINED_COLOR;
    m.attr("ANY_SOURCE") = LOCKSTEP_ANY_SOURCE;

    // The fast entry of Communicator.allreduce (communicator_allreduce above).
    g_communicator_type = py::detail::get_type_info(typeid(Communicator));
    py::object descriptor = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(comm.ptr()), &communicator_allreduce_def));
    if (!descriptor) throw py::error_already_set();
    if (PyObject_SetAttrString(comm.ptr(), "allreduce", descriptor.ptr()) != 0) throw py::error_already_set();
}

}  // namespace lockstep_python
