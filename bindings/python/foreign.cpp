#include "foreign.hpp"

#include "call_site.hpp"
#include "communicator.hpp"
#include "conversion.hpp"

#include <array>
#include <string>
#include <vector>

namespace lockstep_python {

namespace {

constexpr const char* kBegin = "Communicator.begin_foreign";

// An int code as it is, or a name looked up in the C library's table of names (`name_of`, counted up from 0).
template <typename NameOf>
int32_t code_of(py::handle value, NameOf&& name_of, const char* argument, const char* expected) {
    if (PyLong_Check(value.ptr())) return to_integer<int32_t>(value, {kBegin, argument});
    if (!PyUnicode_Check(value.ptr())) raise_type(value, {kBegin, argument}, expected);
    const std::string name = value.cast<std::string>();
    std::string known;
    for (int32_t v = 0; const char* entry = name_of(v); ++v) {
        if (name == entry) return v;
        known += std::string(known.empty() ? "" : ", ") + entry;
    }
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 std::string(kBegin) + ": unknown " + argument + " '" + name + "' (" + known + ")");
}

int32_t optional_integer(py::handle value, const char* argument) {
    return value.is_none() ? -1 : to_integer<int32_t>(value, {kBegin, argument});
}

// The dimensions of a tuple, list or torch.Size, without a Python object per dimension.
class Dims {
public:
    explicit Dims(py::handle shape) {
        PyObject* seq = PySequence_Fast(shape.ptr(), "Communicator.begin_foreign: shape must be a sequence of ints");
        if (seq == nullptr) throw py::error_already_set();
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > static_cast<Py_ssize_t>(small_.size())) large_.resize(static_cast<std::size_t>(n));
        int64_t* out = data();
        for (Py_ssize_t i = 0; i < n; ++i) {
            PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
            const long long v = PyLong_AsLongLong(item);
            if (v == -1 && PyErr_Occurred() != nullptr) {
                Py_DECREF(seq);
                throw py::error_already_set();
            }
            out[i] = v;
        }
        Py_DECREF(seq);
        ndim_ = static_cast<int32_t>(n);
    }
    int64_t* data() { return large_.empty() ? small_.data() : large_.data(); }
    int32_t ndim() const { return ndim_; }

private:
    std::array<int64_t, 8> small_{};
    std::vector<int64_t> large_;
    int32_t ndim_ = 0;
};

uint64_t begin_foreign(Communicator& c, py::handle collective, py::handle dtype, py::handle shape, py::handle root,
                       py::handle op, py::handle device, py::handle varying_dim, py::handle tag) {
    const lockstep_comm_t handle = c.handle();
    const int32_t kind = code_of(collective, lockstep_collective_name, "collective", "a collective's name or code");
    int32_t dtype_code = -1;
    if (PyLong_Check(dtype.ptr())) {
        dtype_code = to_integer<int32_t>(dtype, {kBegin, "dtype"});
    } else if (!dtype.is_none()) {
        dtype_code = parse_dtype(dtype);
    }
    Dims dims(shape);
    int32_t reduce_op = -1;
    if (PyLong_Check(op.ptr())) {
        reduce_op = to_integer<int32_t>(op, {kBegin, "op"});
    } else if (!op.is_none()) {
        reduce_op = parse_op(op, kBegin);
    }
    lockstep_device_type_t device_type = LOCKSTEP_DEVICE_CPU;
    if (PyLong_Check(device.ptr())) {
        device_type = to_integer<int32_t>(device, {kBegin, "device"});
    } else {
        device_type = parse_device(to_string(device, {kBegin, "device"})).type;
    }
    const int32_t root_rank = optional_integer(root, "root");
    const int32_t varying = optional_integer(varying_dim, "varying_dim");
    lockstep_call_options_t options = LOCKSTEP_CALL_OPTIONS_INIT;
    const CallSite site = caller_site();
    if (site.file != nullptr) {
        options.file = site.file;
        options.line = site.line;
        options.function = site.function;
    }
    if (!tag.is_none()) {
        if (!PyUnicode_Check(tag.ptr())) raise_type(tag, {kBegin, "tag"}, "a str or None");
        options.tag = PyUnicode_AsUTF8(tag.ptr());  // the caller's str outlives this call
        if (options.tag == nullptr) throw py::error_already_set();
    }
    uint64_t number = 0;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;  // the signature exchange waits for the other ranks
        status = lockstep_foreign_begin(handle, kind, dtype_code, dims.data(), dims.ndim(), device_type, varying,
                                        root_rank, reduce_op, &options, &number);
    }
    check(status);
    return number;
}

}  // namespace

void bind_foreign(py::module_& m) {
    auto comm = py::reinterpret_borrow<py::class_<Communicator>>(m.attr("Communicator"));
    comm.def("begin_foreign", &begin_foreign, py::arg("collective"), py::arg("dtype") = py::none(),
             py::arg("shape") = py::tuple(), py::arg("root") = py::none(), py::arg("op") = py::none(), py::kw_only(),
             py::arg("device") = "cpu", py::arg("varying_dim") = py::none(), py::arg("tag") = py::none(),
             "For a collective another library carries (gloo, NCCL), called on every rank before it issues the call: "
             "numbers the call and puts it on the watchdog's board until end_foreign(number); in debug mode first "
             "checks that every rank makes the same call, as lockstep's own collectives do, and raises the same "
             "SignatureMismatchError on every rank otherwise (then do not issue the call). collective: its name "
             "('allreduce', 'broadcast', ...) or C code; dtype: a name, a numpy or torch dtype, a C code, or None "
             "(a barrier, or a dtype lockstep does not know); shape: the tensor every rank compares; root and op "
             "(a reduce op's name or C code) where the call has them; device: 'cpu' or 'cuda'; varying_dim: a "
             "dimension allowed to differ between ranks; tag: a name compared across ranks and shown in reports. "
             "The call site is the caller's Python line (frames of lockstep and torch.distributed skipped). Returns "
             "the call's number.")
        .def(
            "end_foreign",
            [](Communicator& c, py::handle number) {
                check(lockstep_foreign_end(c.handle(),
                                           to_integer<uint64_t>(number, {"Communicator.end_foreign", "number"})));
            },
            py::arg("number"),
            "The carrier reported call `number` (from begin_foreign) complete; from any thread, in any order. The "
            "watchdog watches the oldest call not yet ended.")
        .def(
            "set_carrier",
            [](Communicator& c, py::handle name) {
                const std::string text = to_string(name, {"Communicator.set_carrier", "name"});
                check(lockstep_comm_set_carrier(c.handle(), text.c_str()));
            },
            py::arg("name"),
            "Names the library that carries this communicator's foreign calls ('gloo'): the watchdog's reports say "
            "'... in calls carried by gloo'.");
}

}  // namespace lockstep_python
