#include "call_site.hpp"

#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <utility>
#include <vector>

namespace lockstep_python {

namespace {

// The package's directory, absolute and as imported (empty until __init__.py sets it): frames in it are not call
// sites.
std::vector<std::string> g_package_dirs;

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

}  // namespace

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

void bind_call_site(py::module_& m) {
    m.def(
        "_set_package_dirs",
        [](std::vector<std::string> directories) {
            g_package_dirs = std::move(directories);
            clear_places();  // which frames are wrappers' changed
        },
        "Frames in these directories are not call sites.");
    m.def("_caller_site", []() {
        CallSite site = caller_site();
        return py::make_tuple(site.file != nullptr ? site.file : "", site.line,
                              site.function != nullptr ? site.function : "");
    });
}

}  // namespace lockstep_python
