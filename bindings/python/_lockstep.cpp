// _lockstep: the Python binding of lockstep's C interface (lockstep.h, liblockstep_c.so.1), the extension module under
// the package `lockstep` (bindings/python/lockstep/__init__.py builds the public API on it; /tmp/python_api.md is the
// contract).
//
// Three rules hold for every function below:
//  - The GIL is released around every C call that may block or communicate (collectives, init, finalize, creation and
//    freeing of communicators, the batch-size search); it is taken again only to call back into Python.
//  - A failing status becomes the exception class __init__.py registered for that code (_register_errors), with
//    lockstep_last_error() as its message, read on the thread that made the call.
//  - Every collective names its caller: the first Python frame outside this package and outside torch/distributed,
//    so that the debug-mode report and the watchdog point at the user's file:line and not at a wrapper.
//
// Memory is never copied on the way in: a buffer-protocol object (numpy array, bytearray, memoryview) is wrapped with
// lockstep_tensor_wrap and its Py_buffer is released by the tensor's deleter; a DLPack capsule is consumed (renamed
// "used_dltensor[_versioned]") and lockstep calls the producer's deleter.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// ------------------------------------------------------------------------------------------------ errors

// A failing status on its way to Python: the registered translator turns it into the class for `status`.
struct StatusError {
    lockstep_status_t status;
    std::string message;
};

// {status: class} and the base class lockstep.Error, from __init__.py. Strong references kept for the life of the
// process: a static py::object would be destroyed after the interpreter.
PyObject* g_error_classes = nullptr;
PyObject* g_error_base = nullptr;

[[noreturn]] void raise_status(lockstep_status_t status, std::string message) {
    throw StatusError{status, std::move(message)};
}

// The text of the error this thread's last call left, or the code's name when the library left none.
std::string last_error_text(lockstep_status_t status) {
    const char* text = lockstep_last_error();
    if (text != nullptr && text[0] != '\0') return text;
    return lockstep_status_string(status);
}

void check(lockstep_status_t status) {
    if (status != LOCKSTEP_OK) raise_status(status, last_error_text(status));
}

void set_python_error(const StatusError& error) {
    PyObject* cls = nullptr;
    if (g_error_classes != nullptr) {
        py::int_ key(error.status);
        cls = PyDict_GetItemWithError(g_error_classes, key.ptr());  // borrowed
        if (cls == nullptr && PyErr_Occurred()) PyErr_Clear();
    }
    if (cls == nullptr) cls = g_error_base != nullptr ? g_error_base : PyExc_RuntimeError;
    PyObject* message =
        PyUnicode_DecodeUTF8(error.message.data(), static_cast<Py_ssize_t>(error.message.size()), "replace");
    if (message == nullptr) return;
    PyObject* instance = PyObject_CallOneArg(cls, message);
    Py_DECREF(message);
    if (instance == nullptr) return;  // the constructor's own exception stands
    // The class carries .status; the instance gets it too, so that a code without a class of its own keeps its number.
    PyObject* status = PyLong_FromLong(error.status);
    if (status == nullptr || PyObject_SetAttrString(instance, "status", status) != 0) PyErr_Clear();
    Py_XDECREF(status);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance)), instance);
    Py_DECREF(instance);
}

// ------------------------------------------------------------------------------------------------ runtime state

// Bumped by finalize: communicators of an older generation refer to handles the library has freed.
uint64_t g_generation = 0;
bool g_finalized = false;
// The cached world Communicator of this generation (a strong reference, dropped by finalize).
PyObject* g_world = nullptr;
// The package's directory, absolute and as imported (empty until __init__.py sets it): frames in it are not call
// sites.
std::vector<std::string> g_package_dirs;

void ensure_init() {
    if (lockstep_is_initialized()) return;
    if (g_finalized) raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "lockstep was finalised: it cannot be used again");
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_init(nullptr, nullptr);
    }
    check(status);
}

// ------------------------------------------------------------------------------------------------ call sites

// The caller's place. The strings belong to the caller's code object (PyUnicode_AsUTF8 keeps its UTF-8 form), which
// lives as long as the caller's frame, and that frame waits in this call: the pointers stay valid while the GIL is
// released, and the C library copies them once per distinct place.
struct CallSite {
    const char* file = nullptr;
    int line = 0;
    const char* function = nullptr;
};

bool starts_with(const char* text, const std::string& prefix) {
    return !prefix.empty() && std::strncmp(text, prefix.data(), prefix.size()) == 0;
}

// Frames of this package and of torch.distributed are wrappers: the caller is the first frame outside both.
bool is_wrapper_frame(const char* file) {
    for (const std::string& directory : g_package_dirs) {
        if (starts_with(file, directory) && file[directory.size()] == '/') return true;
    }
    return std::strstr(file, "/torch/distributed/") != nullptr;
}

const char* utf8_or_null(PyObject* text) {
    const char* utf8 = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
    if (utf8 == nullptr) PyErr_Clear();
    return utf8;
}

// What one place of a code object tells: its call site, or that it is a wrapper's. A small table keeps the places
// seen last (a loop calls from the same few), each with a strong reference to its code object, so that an address in
// the table is never another code object's: the file, line and function are computed once per place.
struct PlaceEntry {
    PyObject* code = nullptr;  // a strong reference
    int lasti = -1;
    bool wrapper = false;
    CallSite site;
};
std::array<PlaceEntry, 64> g_places;

void clear_places() {
    for (PlaceEntry& e : g_places) {
        PyObject* code = std::exchange(e.code, nullptr);
        e = PlaceEntry{};
        Py_XDECREF(code);
    }
}

PlaceEntry computed_place(PyFrameObject* frame, PyCodeObject* code, int lasti) {
    PlaceEntry entry;
    entry.lasti = lasti;
    const char* file = utf8_or_null(code->co_filename);
    entry.wrapper = file == nullptr || *file == '\0' || is_wrapper_frame(file);
    if (!entry.wrapper) {
        entry.site.file = file;
        entry.site.line = PyFrame_GetLineNumber(frame);
#if PY_VERSION_HEX >= 0x030B0000
        entry.site.function = utf8_or_null(code->co_qualname);
#else
        entry.site.function = utf8_or_null(code->co_name);
#endif
    }
    return entry;
}

// The place a frame is at (with the GIL held; `code` is the frame's, alive while the frame runs).
const PlaceEntry& place_of(PyFrameObject* frame, PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
    const int lasti = PyFrame_GetLasti(frame);
    const std::size_t slot =
        ((reinterpret_cast<std::uintptr_t>(code) >> 4U) ^ (static_cast<std::size_t>(lasti) * 0x9E3779B1U)) %
        g_places.size();
    PlaceEntry& entry = g_places[slot];
    if (entry.code == reinterpret_cast<PyObject*>(code) && entry.lasti == lasti) return entry;
    PlaceEntry fresh = computed_place(frame, code, lasti);
    fresh.code = Py_NewRef(reinterpret_cast<PyObject*>(code));
    PyObject* evicted = std::exchange(entry.code, nullptr);
    entry = fresh;
    Py_XDECREF(evicted);  // after the table is consistent: freeing a code object runs no Python code of ours
    return entry;
#else
    thread_local PlaceEntry uncached;
    uncached = computed_place(frame, code, -1);
    return uncached;
#endif
}

// Walks the Python stack from the innermost frame (with the GIL held).
CallSite caller_site() {
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    while (frame != nullptr) {
        PyCodeObject* code = PyFrame_GetCode(frame);  // new reference; the frame keeps it alive after the decref
        const PlaceEntry& place = place_of(frame, code);
        Py_DECREF(code);
        if (!place.wrapper) {
            const CallSite site = place.site;
            Py_DECREF(frame);
            return site;
        }
        PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
        Py_DECREF(frame);
        frame = back;
    }
    return CallSite{};
}

using OptionalTag = std::optional<std::string>;
// A cudaStream_t as an integer (torch.cuda.current_stream().cuda_stream): lockstep orders the collective after the
// work pending on it instead of synchronising the device.
using OptionalStream = std::optional<uintptr_t>;

// The per-call options of one collective: the caller's place and the report tag, alive for the duration of the call.
class CallOptions {
public:
    CallOptions(const OptionalTag& tag, OptionalStream stream) : site_(caller_site()), tag_(tag) {
        if (stream) options_.cuda_stream = reinterpret_cast<void*>(*stream);
        if (site_.file != nullptr) {
            options_.file = site_.file;
            options_.line = site_.line;
            options_.function = site_.function;
        }
        if (tag_) options_.tag = tag_->c_str();
    }
    CallOptions(const CallOptions&) = delete;
    CallOptions& operator=(const CallOptions&) = delete;
    const lockstep_call_options_t* get() const { return &options_; }

private:
    CallSite site_;
    std::optional<std::string> tag_;
    lockstep_call_options_t options_ = LOCKSTEP_CALL_OPTIONS_INIT;
};

// Set when a collective's body reaches its C call (joined() below tells conversion failures from the call's own).
thread_local bool g_call_started = false;
// How many collectives this thread has taken part in, by a C call or by joining one as rejected: a wrapper that raises
// (the torch backend's checks) tells from it whether its rank entered the collective, or must still join it.
thread_local uint64_t g_calls_entered = 0;

// Runs `call` (a C collective taking the options last) with the GIL released, then raises its failure.
template <typename Call>
void run_collective(const OptionalTag& tag, OptionalStream stream, Call&& call) {
    g_call_started = true;  // from here on, a failure is the collective's own (joined())
    ++g_calls_entered;
    CallOptions options(tag, stream);
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = call(options.get());
    }
    check(status);
}

// Runs a collective's body: converting its arguments, then the C call (run_collective). A conversion that fails on this
// rank (a dtype lockstep lacks, a non-contiguous array, a bad op name) joins the collective as rejected, since the
// other ranks are already in it: in debug mode every rank then raises the same CallRejectedError naming this rank and
// the reason; otherwise this rank raises its own error at once, as a C++ program's would.
void reject_conversion(lockstep_comm_t comm, lockstep_collective_t kind, int32_t root, const char* why) {
    CallOptions options(std::nullopt, std::nullopt);  // the caller's place, as the collective would have passed it
    lockstep_status_t status;
    ++g_calls_entered;
    {
        py::gil_scoped_release release;
        status = lockstep_reject_call(comm, kind, root, LOCKSTEP_SUM, why, options.get());
    }
    if (status == LOCKSTEP_ERROR_CALL_REJECTED) check(status);  // debug mode: every rank raises this same error
}

template <typename Comm, typename Body>
auto joined(Comm& c, lockstep_collective_t kind, int32_t root, Body&& body) -> decltype(body()) {
    g_call_started = false;
    try {
        return body();
    } catch (py::error_already_set& e) {
        if (!g_call_started && !c.freed()) reject_conversion(c.handle(), kind, root, e.what());
        throw;
    } catch (const StatusError& e) {
        if (!g_call_started && !c.freed()) reject_conversion(c.handle(), kind, root, e.message.c_str());
        throw;
    } catch (const std::exception& e) {
        if (!g_call_started && !c.freed()) reject_conversion(c.handle(), kind, root, e.what());
        throw;
    }
}

// ------------------------------------------------------------------------------------------------ dtypes and devices

struct DTypeName {
    const char* name;
    lockstep_dtype_t dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"float32", LOCKSTEP_FLOAT32},   {"float64", LOCKSTEP_FLOAT64}, {"float16", LOCKSTEP_FLOAT16},
    {"bfloat16", LOCKSTEP_BFLOAT16}, {"int8", LOCKSTEP_INT8},       {"uint8", LOCKSTEP_UINT8},
    {"int32", LOCKSTEP_INT32},       {"int64", LOCKSTEP_INT64},     {"bool", LOCKSTEP_BOOL},
    {"float", LOCKSTEP_FLOAT32},     {"double", LOCKSTEP_FLOAT64},  {"half", LOCKSTEP_FLOAT16},
    {"int", LOCKSTEP_INT32},         {"long", LOCKSTEP_INT64},      {"bool_", LOCKSTEP_BOOL},
};

// "float32", a numpy dtype (its .name), a numpy scalar type (its __name__) or a torch dtype ("torch.float32").
lockstep_dtype_t parse_dtype(const py::handle& spec) {
    std::string name;
    if (py::isinstance<py::str>(spec)) {
        name = spec.cast<std::string>();
    } else if (py::hasattr(spec, "name") && py::isinstance<py::str>(spec.attr("name"))) {
        name = spec.attr("name").cast<std::string>();
    } else if (py::hasattr(spec, "__name__")) {
        name = spec.attr("__name__").cast<std::string>();
    } else {
        name = py::str(spec).cast<std::string>();
    }
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    for (const auto& entry : kDTypeNames) {
        if (name == entry.name) return entry.dtype;
    }
    raise_status(LOCKSTEP_ERROR_DTYPE, "lockstep has no dtype '" + name +
                                           "' (float32, float64, float16, bfloat16, int8, uint8, int32, int64, bool)");
}

lockstep_device_t parse_device(const std::string& spec) {
    if (spec == "cpu") return {LOCKSTEP_DEVICE_CPU, 0};
    if (spec == "cuda") return {LOCKSTEP_DEVICE_CUDA, 0};
    if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5) {
        try {
            size_t used = 0;
            int index = std::stoi(spec.substr(5), &used);
            if (used == spec.size() - 5 && index >= 0) return {LOCKSTEP_DEVICE_CUDA, index};
        } catch (const std::exception&) {
        }
    }
    raise_status(LOCKSTEP_ERROR_DEVICE, "lockstep has no device '" + spec + "' (cpu, cuda, cuda:N)");
}

std::string device_name(lockstep_device_t device) {
    if (device.type == LOCKSTEP_DEVICE_CPU) return "cpu";
    return "cuda:" + std::to_string(device.index);
}

lockstep_reduce_op_t parse_op(const std::string& op) {
    if (op == "sum") return LOCKSTEP_SUM;
    if (op == "prod" || op == "product") return LOCKSTEP_PROD;
    if (op == "max") return LOCKSTEP_MAX;
    if (op == "min") return LOCKSTEP_MIN;
    if (op == "mean" || op == "avg") return LOCKSTEP_MEAN;
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "unknown reduce op '" + op + "' (sum, prod, max, min, mean or avg)");
}

// The buffer-protocol format of each dtype; bfloat16 has none.
const char* buffer_format(lockstep_dtype_t dtype) {
    switch (dtype) {
        case LOCKSTEP_FLOAT32:
            return "f";
        case LOCKSTEP_FLOAT64:
            return "d";
        case LOCKSTEP_FLOAT16:
            return "e";
        case LOCKSTEP_INT8:
            return "b";
        case LOCKSTEP_UINT8:
            return "B";
        case LOCKSTEP_INT32:
            return "i";
        case LOCKSTEP_INT64:
            return "q";
        case LOCKSTEP_BOOL:
            return "?";
        default:
            return nullptr;
    }
}

// The dtype of a buffer's format (struct-module syntax, one native little-endian item) and item size.
std::optional<lockstep_dtype_t> dtype_of_format(const char* format, Py_ssize_t itemsize) {
    const char* f = format != nullptr ? format : "B";
    if (*f == '@' || *f == '=' || *f == '<') ++f;
    if (f[0] == '\0' || f[1] != '\0') return std::nullopt;
    std::optional<lockstep_dtype_t> dtype;
    switch (*f) {
        case '?':
            dtype = LOCKSTEP_BOOL;
            break;
        case 'e':
            dtype = LOCKSTEP_FLOAT16;
            break;
        case 'f':
            dtype = LOCKSTEP_FLOAT32;
            break;
        case 'd':
            dtype = LOCKSTEP_FLOAT64;
            break;
        case 'b':
            dtype = LOCKSTEP_INT8;
            break;
        case 'B':
        case 'c':
            dtype = LOCKSTEP_UINT8;
            break;
        case 'h':
        case 'i':
        case 'l':
        case 'q':
        case 'n':
            if (itemsize == 4) dtype = LOCKSTEP_INT32;
            if (itemsize == 8) dtype = LOCKSTEP_INT64;
            break;
        default:
            break;
    }
    if (dtype && lockstep_dtype_size(*dtype) != static_cast<size_t>(itemsize)) return std::nullopt;
    return dtype;
}

// ------------------------------------------------------------------------------------------------ tensors

// One reference to a lockstep tensor, released with the object.
class Tensor {
public:
    explicit Tensor(lockstep_tensor_t handle) : handle_(handle) {}
    Tensor(Tensor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Tensor& operator=(Tensor&& other) noexcept {
        std::swap(handle_, other.handle_);
        return *this;
    }
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;
    ~Tensor() {
        if (handle_ != nullptr) lockstep_tensor_release(handle_);
    }

    lockstep_tensor_t handle() const { return handle_; }

    std::vector<int64_t> shape() const {
        int32_t ndim = 0;
        const int64_t* dims = nullptr;
        check(lockstep_tensor_ndim(handle_, &ndim));
        check(lockstep_tensor_shape(handle_, &dims));
        return std::vector<int64_t>(dims, dims + ndim);
    }
    lockstep_dtype_t dtype() const {
        lockstep_dtype_t dtype;
        check(lockstep_tensor_dtype(handle_, &dtype));
        return dtype;
    }
    lockstep_device_t device() const {
        lockstep_device_t device;
        check(lockstep_tensor_device(handle_, &device));
        return device;
    }
    void* data() const {
        void* data = nullptr;
        check(lockstep_tensor_data(handle_, &data));
        return data;
    }
    int64_t numel() const {
        int64_t numel = 0;
        check(lockstep_tensor_numel(handle_, &numel));
        return numel;
    }
    size_t nbytes() const {
        size_t nbytes = 0;
        check(lockstep_tensor_nbytes(handle_, &nbytes));
        return nbytes;
    }
    bool read_only() const {
        int32_t read_only = 0;
        check(lockstep_tensor_is_read_only(handle_, &read_only));
        return read_only != 0;
    }

private:
    lockstep_tensor_t handle_;
};

Tensor empty_tensor(const std::vector<int64_t>& shape, lockstep_dtype_t dtype, lockstep_device_t device) {
    ensure_init();
    lockstep_tensor_t handle = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_tensor_empty(shape.data(), static_cast<int32_t>(shape.size()), dtype, device, &handle);
    }
    check(status);
    return Tensor(handle);
}

// A new tensor on the same device holding the same bytes (staged through host memory, which works for every device).
Tensor copy_tensor(const Tensor& source, std::optional<lockstep_device_t> device = std::nullopt) {
    Tensor copy = empty_tensor(source.shape(), source.dtype(), device.value_or(source.device()));
    std::vector<unsigned char> host(source.nbytes());
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_tensor_copy_to_host(source.handle(), host.data(), host.size());
        if (status == LOCKSTEP_OK) status = lockstep_tensor_copy_from_host(copy.handle(), host.data(), host.size());
    }
    check(status);
    return copy;
}

// The Py_buffer a wrapped tensor borrows; released by the tensor's deleter, which may run on a thread without the GIL
// or after the interpreter is gone (then the reference is leaked: there is nobody left to give it back to).
struct BorrowedBuffer {
    Py_buffer view;
};

extern "C" void release_borrowed_buffer(void* context) {
    auto* borrowed = static_cast<BorrowedBuffer*>(context);
    if (!Py_IsInitialized()) return;
    if (PyGILState_Check()) {
        PyBuffer_Release(&borrowed->view);
        delete borrowed;
        return;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing()) return;
#else
    if (_Py_IsFinalizing()) return;
#endif  // another thread holds the GIL to tear the interpreter down: do not wait for it
    PyGILState_STATE state = PyGILState_Ensure();
    PyBuffer_Release(&borrowed->view);
    delete borrowed;
    PyGILState_Release(state);
}

// Wraps a buffer-protocol object without copying (read-only buffers give read-only tensors).
Tensor wrap_buffer(const py::handle& object) {
    ensure_init();
    auto borrowed = std::make_unique<BorrowedBuffer>();
    if (PyObject_GetBuffer(object.ptr(), &borrowed->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        throw py::error_already_set();
    }
    Py_buffer& view = borrowed->view;
    std::optional<lockstep_dtype_t> dtype = dtype_of_format(view.format, view.itemsize);
    if (!dtype) {
        std::string format = view.format != nullptr ? view.format : "B";
        Py_ssize_t itemsize = view.itemsize;
        PyBuffer_Release(&view);
        raise_status(LOCKSTEP_ERROR_DTYPE, "lockstep has no dtype for buffer format '" + format + "' (item size " +
                                               std::to_string(itemsize) + ")");
    }
    static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "buffer shapes are passed to lockstep as they are");
    const auto* shape = reinterpret_cast<const int64_t*>(view.shape);
    const uint64_t flags = view.readonly ? LOCKSTEP_TENSOR_READ_ONLY : 0;
    lockstep_tensor_t handle = nullptr;
    lockstep_status_t status =
        lockstep_tensor_wrap(view.buf, shape, view.ndim, *dtype, lockstep_device_t{LOCKSTEP_DEVICE_CPU, 0}, flags,
                             &release_borrowed_buffer, borrowed.get(), &handle);
    if (status != LOCKSTEP_OK) {
        std::string text = last_error_text(status);
        PyBuffer_Release(&view);
        raise_status(status, text);
    }
    borrowed.release();  // the tensor's deleter owns it now
    return Tensor(handle);
}

// ------------------------------------------------------------------------------------------------ DLPack

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kLegacyUsedName = "used_dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kVersionedUsedName = "used_dltensor_versioned";

// Capsule destructors: the deleter runs only when no consumer took the tensor (a consumer renames the capsule).
extern "C" void legacy_capsule_destructor(PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, kLegacyUsedName)) return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
    if (managed == nullptr) {
        PyErr_WriteUnraisable(capsule);
    } else if (managed->deleter != nullptr) {
        managed->deleter(managed);
    }
    PyErr_Restore(type, value, traceback);
}

extern "C" void versioned_capsule_destructor(PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, kVersionedUsedName)) return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (managed == nullptr) {
        PyErr_WriteUnraisable(capsule);
    } else if (managed->deleter != nullptr) {
        managed->deleter(managed);
    }
    PyErr_Restore(type, value, traceback);
}

// Consumes a DLPack capsule: on success lockstep owns the managed tensor and the capsule is renamed used_*; on failure
// the capsule is left as it was (its destructor then gives the tensor back to the producer).
Tensor import_capsule(const py::handle& capsule, uint64_t flags) {
    ensure_init();
    lockstep_tensor_t handle = nullptr;
    if (PyCapsule_IsValid(capsule.ptr(), kVersionedName)) {
        auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), kVersionedName));
        check(lockstep_tensor_from_dlpack_versioned(managed, flags, &handle));
        Tensor tensor(handle);
        if (PyCapsule_SetName(capsule.ptr(), kVersionedUsedName) != 0) throw py::error_already_set();
        return tensor;
    }
    if (PyCapsule_IsValid(capsule.ptr(), kLegacyName)) {
        auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kLegacyName));
        check(lockstep_tensor_from_dlpack(managed, flags, &handle));
        Tensor tensor(handle);
        if (PyCapsule_SetName(capsule.ptr(), kLegacyUsedName) != 0) throw py::error_already_set();
        return tensor;
    }
    if (PyCapsule_IsValid(capsule.ptr(), kVersionedUsedName) || PyCapsule_IsValid(capsule.ptr(), kLegacyUsedName)) {
        raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "this DLPack capsule was already consumed");
    }
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "not a DLPack capsule (\"dltensor\" or \"dltensor_versioned\")");
}

// from_dlpack(obj, copy): a capsule, or an object with __dlpack__ (asked for the versioned form first; a producer that
// does not know max_version raises TypeError and is asked again for the legacy form).
Tensor tensor_from_dlpack(const py::handle& object, const py::object& copy) {
    const bool must_copy = !copy.is_none() && copy.cast<bool>();
    const bool may_copy = copy.is_none() || must_copy;
    const uint64_t flags = may_copy ? LOCKSTEP_DLPACK_ALLOW_COPY : 0;
    py::object capsule;
    if (PyCapsule_CheckExact(object.ptr())) {
        capsule = py::reinterpret_borrow<py::object>(object);
    } else if (py::hasattr(object, "__dlpack__")) {
        py::object method = object.attr("__dlpack__");
        try {
            capsule = method(py::arg("max_version") = py::make_tuple(1, 0));
        } catch (py::error_already_set& error) {
            if (!error.matches(PyExc_TypeError)) throw;
            capsule = method();
        }
    } else {
        throw py::type_error("lockstep.from_dlpack: " + py::repr(py::type::of(object)).cast<std::string>() +
                             " is neither a DLPack capsule nor has __dlpack__");
    }
    Tensor tensor = import_capsule(capsule, flags);
    if (must_copy) return copy_tensor(tensor);
    return tensor;
}

// A Tensor object as is; a buffer-protocol object wrapped; anything else through DLPack. `may_copy` is false for the
// operands of collectives: they work in place, so a copy would silently lose the result.
// A buffer held for the duration of one collective: the memory a cached handle (below) describes stays exported, and
// so alive and in place, until the call is over. Released with the GIL held (operands are locals of the binding).
// It also holds its own reference to the cached handle: a later operand of the same call may evict that handle from
// the cache (and release the cache's reference) while this one still uses it.
struct HeldBuffer {
    Py_buffer view;
    lockstep_tensor_t handle = nullptr;
    HeldBuffer() = default;
    HeldBuffer(const HeldBuffer&) = delete;
    HeldBuffer& operator=(const HeldBuffer&) = delete;
    ~HeldBuffer() {
        lockstep_tensor_release(handle);
        PyBuffer_Release(&view);
    }
};

// Wrapping a buffer costs about as much as a small collective itself, and a training loop passes the same arrays
// again and again: each thread keeps the handles of the last few buffers it wrapped. A handle here owns nothing (no
// deleter) and is used only while a call holds a buffer of exactly that address, shape, dtype and writability, so a
// stale entry can never be reached; entries are compared, never dereferenced.
struct WrapCacheEntry {
    void* buf = nullptr;
    int ndim = -1;
    std::array<int64_t, 8> shape{};
    lockstep_dtype_t dtype = 0;
    bool read_only = false;
    lockstep_tensor_t handle = nullptr;
};
struct WrapCache {
    std::array<WrapCacheEntry, 4> entries;
    std::size_t next = 0;
    ~WrapCache() {
        for (WrapCacheEntry& e : entries) lockstep_tensor_release(e.handle);
    }
};
thread_local WrapCache g_wrap_cache;

// The handle of a held buffer, from the cache or newly wrapped (without a deleter: the HeldBuffer keeps it alive).
lockstep_tensor_t cached_handle(const Py_buffer& view, lockstep_dtype_t dtype) {
    const bool read_only = view.readonly != 0;
    for (const WrapCacheEntry& e : g_wrap_cache.entries) {
        if (e.handle != nullptr && e.buf == view.buf && e.ndim == view.ndim && e.dtype == dtype &&
            e.read_only == read_only && std::equal(e.shape.begin(), e.shape.begin() + e.ndim, view.shape)) {
            return e.handle;
        }
    }
    lockstep_tensor_t handle = nullptr;
    const auto* shape = reinterpret_cast<const int64_t*>(view.shape);
    check(lockstep_tensor_wrap(view.buf, shape, view.ndim, dtype, lockstep_device_t{LOCKSTEP_DEVICE_CPU, 0},
                               read_only ? LOCKSTEP_TENSOR_READ_ONLY : 0, nullptr, nullptr, &handle));
    WrapCacheEntry& slot = g_wrap_cache.entries[g_wrap_cache.next];
    g_wrap_cache.next = (g_wrap_cache.next + 1) % g_wrap_cache.entries.size();
    lockstep_tensor_release(slot.handle);
    slot = WrapCacheEntry{view.buf, view.ndim, {}, dtype, read_only, handle};
    std::copy(shape, shape + view.ndim, slot.shape.begin());
    return handle;
}

struct Operand {
    lockstep_tensor_t handle = nullptr;
    std::optional<Tensor> owned;
    std::unique_ptr<HeldBuffer> held;
};

Operand to_operand(const py::handle& object, bool may_copy) {
    Operand operand;
    if (object.is_none()) return operand;
    if (py::isinstance<Tensor>(object)) {
        operand.handle = object.cast<Tensor&>().handle();
        return operand;
    }
    if (PyObject_CheckBuffer(object.ptr())) {
        Py_buffer view;
        if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            auto guard = std::make_unique<HeldBuffer>();
            guard->view = view;  // released by the guard from here on
            const std::optional<lockstep_dtype_t> dtype = dtype_of_format(guard->view.format, guard->view.itemsize);
            if (dtype && guard->view.ndim <= 8) {
                ensure_init();
                operand.handle = cached_handle(guard->view, *dtype);
                check(lockstep_tensor_retain(operand.handle));
                guard->handle = operand.handle;
                operand.held = std::move(guard);
                return operand;
            }
        } else {
            PyErr_Clear();  // wrap_buffer below asks again and raises the buffer's own error
        }
        operand.owned.emplace(wrap_buffer(object));
    } else {
        operand.owned.emplace(
            tensor_from_dlpack(object, may_copy ? py::object(py::none()) : py::object(py::bool_(false))));
    }
    operand.handle = operand.owned->handle();
    return operand;
}

py::object as_tensor(const py::object& object) {
    if (py::isinstance<Tensor>(object)) return object;
    if (PyObject_CheckBuffer(object.ptr())) return py::cast(wrap_buffer(object));
    return py::cast(tensor_from_dlpack(object, py::none()));
}

// __dlpack__(*, stream, max_version, dl_device, copy) of the current protocol.
py::object tensor_dlpack(const Tensor& tensor, const py::object& stream, const py::object& max_version,
                         const py::object& dl_device, const py::object& copy) {
    if (!stream.is_none() && !py::isinstance<py::int_>(stream)) {
        throw py::type_error("__dlpack__: stream must be None or an integer");
    }
    // The protocol's rule: a device without streams (the CPU) takes stream=None only.
    if (!stream.is_none() && tensor.device().type == LOCKSTEP_DEVICE_CPU) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: a CPU tensor takes stream=None (CPU memory has no streams)");
        throw py::error_already_set();
    }
    // lockstep's collectives return with their results in memory, so there is no pending work to order on `stream`.
    // A (major, minor) pair of integers, as the protocol's max_version and dl_device are.
    const auto int_pair = [](const py::object& value, const char* what) {
        if (!py::isinstance<py::tuple>(value) && !py::isinstance<py::list>(value)) {
            throw py::type_error(std::string("__dlpack__: ") + what + " must be a tuple of two integers");
        }
        py::sequence pair = py::reinterpret_borrow<py::sequence>(value);
        // Integers are anything with __index__ (numpy's integer scalars too).
        const auto integer = [](const py::handle& item) { return PyIndex_Check(item.ptr()) != 0; };
        if (pair.size() != 2 || !integer(pair[0]) || !integer(pair[1])) {
            throw py::type_error(std::string("__dlpack__: ") + what + " must be a tuple of two integers");
        }
        return std::pair<int, int>{py::int_(pair[0]).cast<int>(), py::int_(pair[1]).cast<int>()};
    };
    bool versioned = false;
    if (!max_version.is_none()) versioned = int_pair(max_version, "max_version (major, minor)").first >= 1;
    const bool must_copy = !copy.is_none() && copy.cast<bool>();
    const bool no_copy = !copy.is_none() && !copy.cast<bool>();
    const lockstep_device_t own = tensor.device();
    std::optional<lockstep_device_t> target;
    if (!dl_device.is_none()) {
        const auto [type, index] = int_pair(dl_device, "dl_device (device type, index)");
        if (type == kDLCPU || type == kDLCUDAHost) {
            target = lockstep_device_t{LOCKSTEP_DEVICE_CPU, 0};
        } else if (type == kDLCUDA) {
            target = lockstep_device_t{LOCKSTEP_DEVICE_CUDA, index};
        } else {
            PyErr_SetString(PyExc_BufferError, "__dlpack__: lockstep cannot export to this dl_device");
            throw py::error_already_set();
        }
        if (target->type == own.type && target->index == own.index) target.reset();
    }
    if (target && no_copy) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: another dl_device needs a copy, and copy=False refuses it");
        throw py::error_already_set();
    }
    std::optional<Tensor> copied;
    if (must_copy || target) copied.emplace(copy_tensor(tensor, target));
    const lockstep_tensor_t source = copied ? copied->handle() : tensor.handle();
    if (versioned) {
        DLManagedTensorVersioned* managed = nullptr;
        check(lockstep_tensor_to_dlpack_versioned(source, 0, &managed));
        if (copied) managed->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
        PyObject* capsule = PyCapsule_New(managed, kVersionedName, versioned_capsule_destructor);
        if (capsule == nullptr) {
            managed->deleter(managed);
            throw py::error_already_set();
        }
        return py::reinterpret_steal<py::object>(capsule);
    }
    DLManagedTensor* managed = nullptr;
    check(lockstep_tensor_to_dlpack(source, 0, &managed));
    PyObject* capsule = PyCapsule_New(managed, kLegacyName, legacy_capsule_destructor);
    if (capsule == nullptr) {
        managed->deleter(managed);
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
}

// ------------------------------------------------------------------------------------------------ buffer protocol

// What a buffer exported from a Tensor points at, freed by bf_releasebuffer.
struct ExportedShape {
    std::vector<Py_ssize_t> shape;
    std::vector<Py_ssize_t> strides;
};

extern "C" int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
    view->obj = nullptr;
    try {
        const Tensor& tensor = py::handle(self).cast<const Tensor&>();
        const lockstep_device_t device = tensor.device();
        if (device.type != LOCKSTEP_DEVICE_CPU) {
            PyErr_SetString(PyExc_BufferError, ("a lockstep tensor on " + device_name(device) +
                                                " has no buffer: copy it to the CPU or use DLPack")
                                                   .c_str());
            return -1;
        }
        const lockstep_dtype_t dtype = tensor.dtype();
        const char* format = buffer_format(dtype);
        if (format == nullptr) {
            PyErr_SetString(PyExc_BufferError, (std::string("lockstep.Tensor of dtype ") + lockstep_dtype_name(dtype) +
                                                " has no buffer format: use DLPack")
                                                   .c_str());
            return -1;
        }
        const bool read_only = tensor.read_only();
        if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && read_only) {
            PyErr_SetString(PyExc_BufferError, "a writable buffer was requested from a read-only lockstep.Tensor");
            return -1;
        }
        auto exported = std::make_unique<ExportedShape>();
        const Py_ssize_t itemsize = static_cast<Py_ssize_t>(lockstep_dtype_size(dtype));
        for (int64_t d : tensor.shape()) exported->shape.push_back(static_cast<Py_ssize_t>(d));
        exported->strides.resize(exported->shape.size());
        Py_ssize_t stride = itemsize;
        for (size_t i = exported->shape.size(); i-- > 0;) {
            exported->strides[i] = stride;
            stride *= exported->shape[i];
        }
        view->buf = tensor.data();
        view->len = static_cast<Py_ssize_t>(tensor.nbytes());
        view->itemsize = itemsize;
        view->readonly = read_only ? 1 : 0;
        view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? const_cast<char*>(format) : nullptr;
        if ((flags & PyBUF_ND) == PyBUF_ND) {
            view->ndim = static_cast<int>(exported->shape.size());
            view->shape = exported->shape.empty() ? nullptr : exported->shape.data();
        } else {
            view->ndim = 1;
            view->shape = nullptr;
        }
        view->strides =
            (flags & PyBUF_STRIDES) == PyBUF_STRIDES && !exported->strides.empty() ? exported->strides.data() : nullptr;
        view->suboffsets = nullptr;
        view->internal = exported.release();
        view->obj = self;
        Py_INCREF(self);
        return 0;
    } catch (const StatusError& error) {
        PyErr_SetString(PyExc_BufferError, error.message.c_str());
    } catch (py::error_already_set& error) {
        error.restore();
    } catch (const std::exception& error) {
        PyErr_SetString(PyExc_BufferError, error.what());
    }
    return -1;
}

extern "C" void tensor_releasebuffer(PyObject*, Py_buffer* view) {
    delete static_cast<ExportedShape*>(view->internal);
    view->internal = nullptr;
}

// ------------------------------------------------------------------------------------------------ communicators

// One lockstep communicator handle. Never freed by the garbage collector: freeing is collective (every member, in the
// same order), which collection order across ranks cannot promise; free() does it, and finalize frees the rest.
class Communicator {
public:
    explicit Communicator(lockstep_comm_t handle) : handle_(handle), generation_(g_generation) {}

    lockstep_comm_t handle() const {
        if (generation_ != g_generation || g_finalized) {
            raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "this communicator belongs to a lockstep that was finalised");
        }
        if (handle_ == nullptr) raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "this communicator was freed");
        return handle_;
    }
    bool freed() const { return handle_ == nullptr; }
    // The handle without the checks of handle(), for callers that asked usable() first.
    bool usable() const noexcept { return handle_ != nullptr && generation_ == g_generation && !g_finalized; }
    lockstep_comm_t usable_handle() const noexcept { return handle_; }
    void free() {
        lockstep_comm_t handle = this->handle();
        lockstep_status_t status;
        {
            py::gil_scoped_release release;
            status = lockstep_comm_free(handle);
        }
        check(status);
        handle_ = nullptr;
    }

    int32_t rank() const {
        int32_t rank = -1;
        check(lockstep_comm_rank(handle(), &rank));
        return rank;
    }
    int32_t size() const {
        int32_t size = 0;
        check(lockstep_comm_size(handle(), &size));
        return size;
    }

private:
    lockstep_comm_t handle_;
    uint64_t generation_;
};

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

lockstep_comm_options_t comm_options(const py::object& debug, const py::object& timeout,
                                     const py::object& shared_memory) {
    lockstep_comm_options_t options = LOCKSTEP_COMM_OPTIONS_INIT;
    if (!debug.is_none()) options.debug = debug.cast<bool>() ? 1 : 0;
    if (!timeout.is_none()) options.timeout = timeout.cast<double>();
    if (!shared_memory.is_none()) options.shared_memory = shared_memory.cast<bool>() ? 1 : 0;
    return options;
}

py::object communicator_from_fortran(int64_t fortran_handle, const py::object& debug, const py::object& timeout,
                                     const py::object& shared_memory) {
    ensure_init();
    const lockstep_comm_options_t options = comm_options(debug, timeout, shared_memory);
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

// A second reference to a tensor the caller holds, for its getters.
Tensor borrow(lockstep_tensor_t handle) {
    check(lockstep_tensor_retain(handle));
    return Tensor(handle);
}

// ------------------------------------------------------------------------------------------------ the batch-size
// search

struct BatchSearch {
    py::object function;
    py::object is_out_of_memory;
    std::optional<py::error_already_set> error;
};

extern "C" lockstep_status_t call_batch_function(int64_t batch_size, void* user_data) {
    auto* search = static_cast<BatchSearch*>(user_data);
    py::gil_scoped_acquire gil;
    try {
        search->function(batch_size);
        return LOCKSTEP_OK;
    } catch (py::error_already_set& error) {
        bool out_of_memory = false;
        try {
            out_of_memory = search->is_out_of_memory(error.value()).cast<bool>();
        } catch (py::error_already_set&) {
            out_of_memory = false;  // a broken predicate: the original exception is what the caller must see
        }
        if (out_of_memory) return LOCKSTEP_ERROR_OUT_OF_MEMORY;
        search->error.emplace(std::move(error));
        return LOCKSTEP_ERROR_CALLBACK;
    } catch (const StatusError& error) {
        set_python_error(error);
        search->error.emplace();
        return LOCKSTEP_ERROR_CALLBACK;
    } catch (const std::exception& error) {
        PyErr_SetString(PyExc_RuntimeError, error.what());
        search->error.emplace();
        return LOCKSTEP_ERROR_CALLBACK;
    }
}

int64_t find_executable_batch_size(Communicator& comm, const py::object& function, int64_t starting_batch_size,
                                   double factor, int64_t minimum, bool refine_upward,
                                   const py::object& is_out_of_memory) {
    lockstep_comm_t handle = comm.handle();
    BatchSearch search{function, is_out_of_memory, std::nullopt};
    lockstep_batch_size_options_t options = LOCKSTEP_BATCH_SIZE_OPTIONS_INIT;
    options.factor = factor;
    options.minimum = minimum;
    if (refine_upward) options.flags |= LOCKSTEP_BATCH_REFINE_UPWARD;
    int64_t batch_size = 0;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_find_executable_batch_size(handle, starting_batch_size, &call_batch_function, &search,
                                                     &options, &batch_size);
    }
    if (search.error) {
        // This rank's own exception, as the function raised it; the other ranks get the library's DistributedError.
        py::error_already_set error = std::move(*search.error);
        search.error.reset();
        throw error;
    }
    check(status);
    return batch_size;
}

// ------------------------------------------------------------------------------------------------ logging

lockstep_log_level_t parse_level(const py::object& level) {
    if (py::isinstance<py::int_>(level)) {
        // Python's logging numbers: DEBUG 10, INFO 20, WARNING 30, ERROR 40, CRITICAL 50.
        const int number = level.cast<int>();
        if (number >= 50) return LOCKSTEP_LOG_CRITICAL;
        if (number >= 40) return LOCKSTEP_LOG_ERROR;
        if (number >= 30) return LOCKSTEP_LOG_WARNING;
        if (number >= 20) return LOCKSTEP_LOG_INFO;
        return LOCKSTEP_LOG_DEBUG;
    }
    const std::string name = level.cast<std::string>();
    if (name == "debug") return LOCKSTEP_LOG_DEBUG;
    if (name == "info") return LOCKSTEP_LOG_INFO;
    if (name == "warning" || name == "warn") return LOCKSTEP_LOG_WARNING;
    if (name == "error") return LOCKSTEP_LOG_ERROR;
    if (name == "critical") return LOCKSTEP_LOG_CRITICAL;
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 "unknown log level '" + name + "' (debug, info, warning, error, critical)");
}

lockstep_log_scope_t parse_scope(const std::string& scope) {
    if (scope == "main") return LOCKSTEP_LOG_MAIN_PROCESS;
    if (scope == "all") return LOCKSTEP_LOG_EVERY_RANK;
    if (scope == "ordered") return LOCKSTEP_LOG_IN_RANK_ORDER;
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "unknown log scope '" + scope + "' (main, all, ordered)");
}

// ------------------------------------------------------------------------------------------------ runtime functions

struct Identity {
    int32_t rank = 0, size = 0, local_rank = 0, local_size = 0;
};

Identity identity() {
    ensure_init();
    Identity id;
    check(lockstep_runtime_identity(nullptr, &id.rank, &id.size, &id.local_rank, &id.local_size));
    return id;
}

lockstep_runtime_t runtime_handle() {
    ensure_init();
    lockstep_runtime_t runtime = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_init(nullptr, &runtime);
    }
    check(status);
    return runtime;
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
    "allreduce(x, op='sum', out=None, *, tag=None, stream=None): the reduction of x over every rank, in place in "
    "x's memory (or into out); returns x (or out)."};

PYBIND11_MODULE(_lockstep, m) {
    m.doc() = "lockstep's C interface (lockstep.h) for Python; use the package `lockstep`, which builds on it.";

    py::register_exception_translator([](std::exception_ptr pointer) {
        try {
            if (pointer) std::rethrow_exception(pointer);
        } catch (const StatusError& error) {
            set_python_error(error);
        }
    });

    m.def(
        "_register_errors",
        [](py::object base, py::dict classes) {
            Py_XDECREF(g_error_base);
            Py_XDECREF(g_error_classes);
            g_error_base = base.release().ptr();
            g_error_classes = classes.release().ptr();
        },
        "Sets lockstep.Error and the {status: class} map the binding raises.");
    m.def(
        "_set_package_dirs",
        [](std::vector<std::string> directories) {
            g_package_dirs = std::move(directories);
            clear_places();  // which frames are wrappers' changed
        },
        "Frames in these directories are not call sites.");
    m.def(
        "_calls_entered", []() { return g_calls_entered; },
        "How many collectives this thread has entered (by a call, or by joining one as rejected).");
    m.def("_caller_site", []() {
        CallSite site = caller_site();
        return py::make_tuple(site.file != nullptr ? site.file : "", site.line,
                              site.function != nullptr ? site.function : "");
    });
    m.def("status_string", [](lockstep_status_t status) { return std::string(lockstep_status_string(status)); });
    m.def("last_error", []() { return std::string(lockstep_last_error()); });
    m.def("last_error_status", &lockstep_last_error_status);
    m.def("clear_last_error", &lockstep_clear_last_error);

    m.def("version", []() {
        int32_t major = 0, minor = 0, patch = 0;
        lockstep_get_version(&major, &minor, &patch);
        return py::make_tuple(major, minor, patch);
    });
    m.def("header_version", []() { return LOCKSTEP_C_VERSION; });
    m.def("build_info", []() { return std::string(lockstep_get_build_info()); });

    m.def(
        "init",
        [](py::object debug, py::object timeout, py::object config_file) {
            if (g_finalized)
                raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "lockstep was finalised: it cannot be used again");
            lockstep_init_options_t options = LOCKSTEP_INIT_OPTIONS_INIT;
            if (!debug.is_none()) options.debug = debug.cast<bool>() ? 1 : 0;
            if (!timeout.is_none()) options.timeout = timeout.cast<double>();
            std::string file;
            if (!config_file.is_none()) {
                file = py::str(config_file).cast<std::string>();
                options.config_file = file.c_str();
            }
            lockstep_status_t status;
            {
                py::gil_scoped_release release;
                status = lockstep_init(&options, nullptr);
            }
            check(status);
        },
        py::arg("debug") = py::none(), py::arg("timeout") = py::none(), py::arg("config_file") = py::none(),
        "Starts lockstep, and MPI unless it runs already (then lockstep adopts it). Idempotent; every other function "
        "calls it on first use.");
    m.def("finalize", []() {
        if (!lockstep_is_initialized()) return;
        // The cached world communicator and every Communicator object of this generation become invalid.
        Py_XDECREF(g_world);
        g_world = nullptr;
        ++g_generation;
        g_finalized = true;
        lockstep_status_t status;
        {
            py::gil_scoped_release release;
            status = lockstep_finalize();
        }
        check(status);
    });
    m.def("is_initialized", []() { return lockstep_is_initialized() != 0; });
    m.def("is_finalized", []() { return g_finalized; });
    m.def("owns_mpi", []() { return lockstep_runtime_owns_mpi(runtime_handle()) != 0; });
    m.def("rank", []() { return identity().rank; });
    m.def("size", []() { return identity().size; });
    m.def("local_rank", []() { return identity().local_rank; });
    m.def("local_size", []() { return identity().local_size; });

    // ---------------------------------------------------------------- Tensor
    py::class_<Tensor> tensor(
        m, "Tensor", py::buffer_protocol(),
        "A lockstep tensor: its own memory (lockstep.empty) or a view of the caller's (as_tensor, "
        "from_dlpack).");
    // pybind11's own getbuffer cannot refuse a buffer (bfloat16, CUDA) without an exception escaping into C: the type
    // gets these instead.
    auto* type = reinterpret_cast<PyTypeObject*>(tensor.ptr());
    type->tp_as_buffer->bf_getbuffer = tensor_getbuffer;
    type->tp_as_buffer->bf_releasebuffer = tensor_releasebuffer;
    PyType_Modified(type);
    tensor.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
        .def_property_readonly("ndim", [](const Tensor& t) { return t.shape().size(); })
        .def_property_readonly("dtype", [](const Tensor& t) { return std::string(lockstep_dtype_name(t.dtype())); })
        .def_property_readonly("device", [](const Tensor& t) { return device_name(t.device()); })
        .def_property_readonly("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); })
        .def_property_readonly("numel", &Tensor::numel)
        .def_property_readonly("nbytes", &Tensor::nbytes)
        .def_property_readonly("read_only", &Tensor::read_only)
        .def_property_readonly("_handle", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.handle()); })
        .def("__dlpack__", &tensor_dlpack, py::kw_only(), py::arg("stream") = py::none(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
        .def("__dlpack_device__",
             [](const Tensor& t) {
                 const lockstep_device_t device = t.device();
                 return py::make_tuple(device.type == LOCKSTEP_DEVICE_CPU ? int(kDLCPU) : int(kDLCUDA), device.index);
             })
        .def("numpy",
             [](py::object self) {
                 // np.asarray would wrap an object it cannot read as a 0-d object array, silently.
                 const Tensor& t = self.cast<const Tensor&>();
                 if (t.device().type != LOCKSTEP_DEVICE_CPU) {
                     raise_status(LOCKSTEP_ERROR_DEVICE, "numpy(): the tensor is on " + device_name(t.device()) +
                                                             "; numpy reads host memory only (use "
                                                             "torch.from_dlpack, or a CPU tensor)");
                 }
                 if (t.dtype() == LOCKSTEP_BFLOAT16) {
                     raise_status(LOCKSTEP_ERROR_DTYPE,
                                  "numpy(): numpy has no bfloat16; use torch.from_dlpack(t), or a float32 tensor");
                 }
                 return py::module_::import("numpy").attr("asarray")(self);
             })
        .def("__len__",
             [](const Tensor& t) {
                 std::vector<int64_t> shape = t.shape();
                 if (shape.empty()) throw py::type_error("len() of a 0-d lockstep.Tensor");
                 return shape[0];
             })
        .def("__repr__", [](const Tensor& t) {
            std::string text = "lockstep.Tensor(shape=(";
            std::vector<int64_t> shape = t.shape();
            for (size_t i = 0; i < shape.size(); ++i) {
                text += std::to_string(shape[i]);
                if (i + 1 < shape.size() || shape.size() == 1) text += shape.size() == 1 ? "," : ", ";
            }
            text += "), dtype=" + std::string(lockstep_dtype_name(t.dtype())) + ", device=" + device_name(t.device());
            if (t.read_only()) text += ", read_only=True";
            return text + ")";
        });

    m.def(
        "empty",
        [](py::object shape, py::object dtype, std::string device) {
            std::vector<int64_t> dims;
            if (py::isinstance<py::int_>(shape)) {
                dims.push_back(shape.cast<int64_t>());
            } else {
                dims = shape.cast<std::vector<int64_t>>();
            }
            return empty_tensor(dims, parse_dtype(dtype), parse_device(device));
        },
        py::arg("shape"), py::arg("dtype") = "float32", py::arg("device") = "cpu");
    m.def(
        "from_dlpack", [](py::object object, py::object copy) { return tensor_from_dlpack(object, copy); },
        py::arg("obj"), py::arg("copy") = py::none());
    m.def("as_tensor", &as_tensor, py::arg("obj"));
    m.def("dtype_size", [](py::object dtype) { return lockstep_dtype_size(parse_dtype(dtype)); });

    // ---------------------------------------------------------------- Communicator
    py::class_<Communicator> comm(m, "Communicator", "A lockstep communicator: every collective runs on it.");
    comm.def_static("world", &world_communicator, "The communicator over every process of the runtime.")
        .def_static(
            "from_fortran",
            [](int64_t handle, py::object debug, py::object timeout, py::object shared_memory) {
                return communicator_from_fortran(handle, debug, timeout, shared_memory);
            },
            py::arg("handle"), py::kw_only(), py::arg("debug") = py::none(), py::arg("timeout") = py::none(),
            py::arg("shared_memory") = py::none(),
            "A communicator over a duplicate of an MPI communicator given by its Fortran handle (collective).")
        .def_static(
            "from_mpi4py",
            [](py::object mpi4py_comm, py::object debug, py::object timeout, py::object shared_memory) {
                // Comm.py2f() is MPI_Comm_c2f of mpi4py's handle, in the MPI that mpi4py and lockstep share.
                ensure_init();
                const int64_t handle = mpi4py_comm.attr("py2f")().cast<int64_t>();
                return communicator_from_fortran(handle, debug, timeout, shared_memory);
            },
            py::arg("comm"), py::kw_only(), py::arg("debug") = py::none(), py::arg("timeout") = py::none(),
            py::arg("shared_memory") = py::none(),
            "A communicator over a duplicate of an mpi4py communicator (collective over it).")
        .def_property_readonly("rank", &Communicator::rank)
        .def_property_readonly("size", &Communicator::size)
        .def_property_readonly("freed", &Communicator::freed)
        .def_property(
            "debug",
            [](const Communicator& c) {
                int32_t on = 0;
                check(lockstep_comm_get_debug(c.handle(), &on));
                return on != 0;
            },
            [](Communicator& c, bool on) { check(lockstep_comm_set_debug(c.handle(), on ? 1 : 0)); })
        .def_property_readonly("timeout",
                               [](const Communicator& c) {
                                   double seconds = 0;
                                   check(lockstep_comm_get_timeout(c.handle(), &seconds));
                                   return seconds;
                               })
        .def_property_readonly("fortran_handle",
                               [](const Communicator& c) {
                                   int64_t handle = 0;
                                   check(lockstep_comm_fortran_handle(c.handle(), &handle));
                                   return handle;
                               })
        .def_property_readonly("_handle", [](const Communicator& c) { return reinterpret_cast<uintptr_t>(c.handle()); })
        .def(
            "set_step", [](Communicator& c, uint64_t step) { check(lockstep_comm_set_step(c.handle(), step)); },
            py::arg("step"))
        .def(
            "split",
            [](Communicator& c, py::object color, int32_t key) {
                const int32_t colour = color.is_none() ? LOCKSTEP_UNDEFINED_COLOR : color.cast<int32_t>();
                lockstep_comm_t handle = c.handle();
                lockstep_comm_t out = nullptr;
                lockstep_status_t status;
                {
                    py::gil_scoped_release release;
                    status = lockstep_comm_split(handle, colour, key, &out);
                }
                check(status);
                return communicator_or_none(out);
            },
            py::arg("color"), py::arg("key") = 0)
        .def("dup",
             [](Communicator& c) {
                 lockstep_comm_t handle = c.handle();
                 lockstep_comm_t out = nullptr;
                 lockstep_status_t status;
                 {
                     py::gil_scoped_release release;
                     status = lockstep_comm_dup(handle, &out);
                 }
                 check(status);
                 return communicator_or_none(out);
             })
        .def(
            "create_group",
            [](Communicator& c, std::vector<int32_t> ranks, int32_t tag) {
                lockstep_comm_t handle = c.handle();
                lockstep_comm_t out = nullptr;
                lockstep_status_t status;
                {
                    py::gil_scoped_release release;
                    status = lockstep_comm_create_group(handle, ranks.data(), ranks.size(), tag, &out);
                }
                check(status);
                return communicator_or_none(out);
            },
            py::arg("ranks"), py::arg("tag") = 0)
        .def(
            "_reject",
            [](Communicator& c, const std::string& kind, int32_t root, const std::string& message) {
                static const std::pair<const char*, lockstep_collective_t> kinds[] = {
                    {"barrier", LOCKSTEP_COLLECTIVE_BARRIER},   {"broadcast", LOCKSTEP_COLLECTIVE_BROADCAST},
                    {"reduce", LOCKSTEP_COLLECTIVE_REDUCE},     {"allreduce", LOCKSTEP_COLLECTIVE_ALLREDUCE},
                    {"gather", LOCKSTEP_COLLECTIVE_GATHER},     {"allgather", LOCKSTEP_COLLECTIVE_ALLGATHER},
                    {"scatter", LOCKSTEP_COLLECTIVE_SCATTER},   {"reduce_scatter", LOCKSTEP_COLLECTIVE_REDUCE_SCATTER},
                    {"alltoall", LOCKSTEP_COLLECTIVE_ALLTOALL}, {"gather_uneven", LOCKSTEP_COLLECTIVE_GATHER_UNEVEN}};
                for (const auto& [name, value] : kinds) {
                    if (kind == name) {
                        reject_conversion(c.handle(), value, root, message.c_str());
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
        .def("free", &Communicator::free)
        .def("async_error",
             [](Communicator& c) -> py::object {
                 const char* text = nullptr;
                 const lockstep_status_t status = lockstep_comm_get_async_error(c.handle(), &text);
                 if (status == LOCKSTEP_OK) return py::none();
                 if (status == LOCKSTEP_ERROR_TIMEOUT) return py::str(text != nullptr ? text : "");
                 check(status);
                 return py::none();
             })
        .def("last_error", [](Communicator& c) { return std::string(lockstep_comm_last_error(c.handle())); })
        .def(
            "abort",
            [](Communicator& c, int32_t code, std::optional<std::string> reason) {
                lockstep_comm_t handle = c.handle();
                lockstep_status_t status;
                {
                    py::gil_scoped_release release;
                    status = lockstep_comm_abort(handle, code, reason ? reason->c_str() : nullptr);
                }
                check(status);
            },
            py::arg("code") = 1, py::arg("reason") = py::none())
        .def("__repr__",
             [](const Communicator& c) {
                 if (c.freed()) return std::string("lockstep.Communicator(freed)");
                 return "lockstep.Communicator(rank=" + std::to_string(c.rank()) +
                        ", size=" + std::to_string(c.size()) + ")";
             })
        // ------------------------------------------------------------ collectives
        .def(
            "barrier",
            [](Communicator& c, OptionalTag tag, OptionalStream stream) {
                return joined(c, LOCKSTEP_COLLECTIVE_BARRIER, -1, [&]() -> void {
                    lockstep_comm_t handle = c.handle();
                    run_collective(tag, stream,
                                   [&](const lockstep_call_options_t* o) { return lockstep_barrier(handle, o); });
                });
            },
            py::kw_only(), py::arg("tag") = py::none(), py::arg("stream") = py::none())
        .def(
            "broadcast",
            [](Communicator& c, py::object x, int32_t root, OptionalTag tag, OptionalStream stream) {
                return joined(c, LOCKSTEP_COLLECTIVE_BROADCAST, root, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    Operand t = to_operand(x, false);
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_broadcast(handle, t.handle, t.handle, root, o);
                    });
                    return x;
                });
            },
            py::arg("x"), py::arg("root") = 0, py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none())
        .def(
            "_allreduce_general",
            [](Communicator& c, py::object x, std::string op, py::object out, OptionalTag tag, OptionalStream stream) {
                return joined(c, LOCKSTEP_COLLECTIVE_ALLREDUCE, -1, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    const lockstep_reduce_op_t reduce_op = parse_op(op);
                    Operand input = to_operand(x, false);
                    Operand output = out.is_none() ? Operand{input.handle, std::nullopt} : to_operand(out, false);
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_allreduce(handle, input.handle, output.handle, reduce_op, o);
                    });
                    return out.is_none() ? x : out;
                });
            },
            py::arg("x"), py::arg("op") = "sum", py::arg("out") = py::none(), py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none())
        .def(
            "reduce",
            [](Communicator& c, py::object x, int32_t root, std::string op, py::object out, OptionalTag tag,
               OptionalStream stream) {
                return joined(c, LOCKSTEP_COLLECTIVE_REDUCE, root, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    const lockstep_reduce_op_t reduce_op = parse_op(op);
                    Operand input = to_operand(x, false);
                    Operand output = out.is_none() ? Operand{input.handle, std::nullopt} : to_operand(out, false);
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_reduce(handle, input.handle, output.handle, reduce_op, root, o);
                    });
                    return out.is_none() ? x : out;
                });
            },
            py::arg("x"), py::arg("root") = 0, py::arg("op") = "sum", py::arg("out") = py::none(), py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none())
        .def(
            "allgather",
            [](Communicator& c, py::object x, py::object out, OptionalTag tag, OptionalStream stream) -> py::object {
                return joined(c, LOCKSTEP_COLLECTIVE_ALLGATHER, -1, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    std::optional<Tensor> created;
                    Operand output;
                    if (out.is_none()) {
                        Tensor in = borrow(input.handle);
                        created.emplace(empty_tensor(gathered_shape(in, c.size()), in.dtype(), in.device()));
                        output.handle = created->handle();
                    } else {
                        output = to_operand(out, false);
                    }
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_allgather(handle, input.handle, output.handle, o);
                    });
                    if (created) return py::cast(std::move(*created));
                    return out;
                });
            },
            py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none())
        .def(
            "gather",
            [](Communicator& c, py::object x, int32_t root, py::object out, OptionalTag tag,
               OptionalStream stream) -> py::object {
                return joined(c, LOCKSTEP_COLLECTIVE_GATHER, root, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    const bool is_root = c.rank() == root;
                    Operand input = to_operand(x, false);
                    std::optional<Tensor> created;
                    Operand output;
                    if (is_root) {
                        if (out.is_none()) {
                            Tensor in = borrow(input.handle);
                            created.emplace(empty_tensor(gathered_shape(in, c.size()), in.dtype(), in.device()));
                            output.handle = created->handle();
                        } else {
                            output = to_operand(out, false);
                        }
                    }
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_gather(handle, input.handle, output.handle, root, o);
                    });
                    if (!is_root) return py::none();
                    if (created) return py::cast(std::move(*created));
                    return out;
                });
            },
            py::arg("x"), py::arg("root") = 0, py::arg("out") = py::none(), py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none())
        .def(
            "scatter",
            [](Communicator& c, py::object x, py::object out, int32_t root, OptionalTag tag, OptionalStream stream) {
                return joined(c, LOCKSTEP_COLLECTIVE_SCATTER, root, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    Operand output = to_operand(out, false);
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_scatter(handle, input.handle, output.handle, root, o);
                    });
                    return out;
                });
            },
            py::arg("x"), py::arg("out"), py::arg("root") = 0, py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none())
        .def(
            "reduce_scatter",
            [](Communicator& c, py::object x, py::object out, std::string op, OptionalTag tag,
               OptionalStream stream) -> py::object {
                return joined(c, LOCKSTEP_COLLECTIVE_REDUCE_SCATTER, -1, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    const lockstep_reduce_op_t reduce_op = parse_op(op);
                    Operand input = to_operand(x, false);
                    std::optional<Tensor> created;
                    Operand output;
                    if (out.is_none()) {
                        Tensor in = borrow(input.handle);
                        std::vector<int64_t> shape = in.shape();
                        // A first dimension the size does not divide is left for the library to report, on every rank.
                        if (!shape.empty()) shape[0] /= c.size();
                        created.emplace(empty_tensor(shape, in.dtype(), in.device()));
                        output.handle = created->handle();
                    } else {
                        output = to_operand(out, false);
                    }
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_reduce_scatter(handle, input.handle, output.handle, reduce_op, o);
                    });
                    if (created) return py::cast(std::move(*created));
                    return out;
                });
            },
            py::arg("x"), py::arg("out") = py::none(), py::arg("op") = "sum", py::kw_only(),
            py::arg("tag") = py::none(), py::arg("stream") = py::none())
        .def(
            "alltoall",
            [](Communicator& c, py::object x, py::object out, OptionalTag tag, OptionalStream stream) -> py::object {
                return joined(c, LOCKSTEP_COLLECTIVE_ALLTOALL, -1, [&]() -> py::object {
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    std::optional<Tensor> created;
                    Operand output;
                    if (out.is_none()) {
                        Tensor in = borrow(input.handle);
                        created.emplace(empty_tensor(in.shape(), in.dtype(), in.device()));
                        output.handle = created->handle();
                    } else {
                        output = to_operand(out, false);
                    }
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_alltoall(handle, input.handle, output.handle, o);
                    });
                    if (created) return py::cast(std::move(*created));
                    return out;
                });
            },
            py::arg("x"), py::arg("out") = py::none(), py::kw_only(), py::arg("tag") = py::none(),
            py::arg("stream") = py::none())
        .def(
            "gather_uneven",
            [](Communicator& c, py::object x, OptionalTag tag, OptionalStream stream) {
                return joined(c, LOCKSTEP_COLLECTIVE_GATHER_UNEVEN, -1, [&]() -> Tensor {
                    lockstep_comm_t handle = c.handle();
                    Operand input = to_operand(x, false);
                    lockstep_tensor_t result = nullptr;
                    run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                        return lockstep_gather_uneven(handle, input.handle, &result, o);
                    });
                    return Tensor(result);
                });
            },
            py::arg("x"), py::kw_only(), py::arg("tag") = py::none(), py::arg("stream") = py::none())
        .def(
            "send",
            [](Communicator& c, py::object x, int32_t dest, int32_t tag, OptionalTag name, OptionalStream stream) {
                lockstep_comm_t handle = c.handle();
                Operand t = to_operand(x, false);
                run_collective(name, stream, [&](const lockstep_call_options_t* o) {
                    return lockstep_send(handle, t.handle, dest, tag, o);
                });
            },
            py::arg("x"), py::arg("dest"), py::arg("tag") = 0, py::kw_only(), py::arg("name") = py::none(),
            py::arg("stream") = py::none())
        .def(
            "recv",
            [](Communicator& c, py::object x, int32_t source, int32_t tag, OptionalTag name, OptionalStream stream) {
                lockstep_comm_t handle = c.handle();
                Operand t = to_operand(x, false);
                int32_t actual = -1;
                run_collective(name, stream, [&](const lockstep_call_options_t* o) {
                    return lockstep_recv(handle, t.handle, source, tag, &actual, o);
                });
                return actual;
            },
            py::arg("x"), py::arg("source") = LOCKSTEP_ANY_SOURCE, py::arg("tag") = 0, py::kw_only(),
            py::arg("name") = py::none(), py::arg("stream") = py::none());

    // ---------------------------------------------------------------- agreements, memory, seeds, logging
    m.def(
        "set_trigger", [](Communicator& c) { check(lockstep_set_trigger(c.handle())); }, py::arg("comm"));
    m.def(
        "check_trigger",
        [](Communicator& c, OptionalTag tag, OptionalStream stream) {
            lockstep_comm_t handle = c.handle();
            int32_t triggered = 0;
            run_collective(tag, stream, [&](const lockstep_call_options_t* o) {
                return lockstep_check_trigger(handle, &triggered, o);
            });
            return triggered != 0;
        },
        py::arg("comm"), py::kw_only(), py::arg("tag") = py::none(), py::arg("stream") = py::none());
    m.def("find_executable_batch_size", &find_executable_batch_size, py::arg("comm"), py::arg("function"),
          py::arg("starting_batch_size"), py::arg("factor"), py::arg("minimum"), py::arg("refine_upward"),
          py::arg("is_out_of_memory"),
          "The batch-size search of lockstep_find_executable_batch_size; function(batch_size) is called with the GIL.");
    m.def("free_memory", []() {
        ensure_init();
        lockstep_status_t status;
        {
            py::gil_scoped_release release;
            status = lockstep_free_memory();
        }
        check(status);
    });
    m.def(
        "set_seed",
        [](uint64_t seed, bool device_specific) {
            ensure_init();
            check(lockstep_set_seed(seed, device_specific ? 1 : 0));
        },
        py::arg("seed"), py::arg("device_specific") = false);
    m.def(
        "log",
        [](std::string message, py::object level, std::string scope, std::optional<std::string> logger) {
            ensure_init();
            const lockstep_log_level_t log_level = parse_level(level);
            const lockstep_log_scope_t log_scope = parse_scope(scope);
            lockstep_status_t status;
            {
                // The ordered scope is collective over the world.
                py::gil_scoped_release release;
                status = lockstep_log(logger ? logger->c_str() : nullptr, log_level, log_scope, message.c_str());
            }
            check(status);
        },
        py::arg("message"), py::arg("level") = "info", py::arg("scope") = "main", py::arg("logger") = py::none());

    m.attr("UNDEFINED_COLOR") = LOCKSTEP_UNDEFINED_COLOR;
    m.attr("ANY_SOURCE") = LOCKSTEP_ANY_SOURCE;
    py::dict codes;
    for (lockstep_status_t code = LOCKSTEP_OK; code <= LOCKSTEP_ERROR_CALLBACK; ++code) {
        codes[py::int_(code)] = py::str(lockstep_status_string(code));
    }
    m.attr("STATUS_NAMES") = codes;

    // The fast entry of Communicator.allreduce (communicator_allreduce above).
    g_communicator_type = py::detail::get_type_info(typeid(Communicator));
    py::object descriptor = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(comm.ptr()), &communicator_allreduce_def));
    if (!descriptor) throw py::error_already_set();
    if (PyObject_SetAttrString(comm.ptr(), "allreduce", descriptor.ptr()) != 0) throw py::error_already_set();
}
