// The Python line a process is at (python_site.hpp).

#include "python_site.hpp"

#include <lockstep/base/symbolizer.hpp>

#include <dlfcn.h>
#include <fmt/format.h>

namespace lockstep::check {
namespace {

template <class F>
F symbol(const char* name) {
    return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));  // NOLINT: the C API's own signatures
}

}  // namespace

std::optional<std::string> python_call_site() {
    const auto initialized = symbol<int (*)()>("Py_IsInitialized");
    const auto ensure = symbol<int (*)()>("PyGILState_Ensure");
    const auto release = symbol<void (*)(int)>("PyGILState_Release");
    const auto current_frame = symbol<void* (*)()>("PyEval_GetFrame");
    const auto line_of = symbol<int (*)(void*)>("PyFrame_GetLineNumber");
    const auto code_of = symbol<void* (*)(void*)>("PyFrame_GetCode");
    const auto attribute = symbol<void* (*)(void*, const char*)>("PyObject_GetAttrString");
    const auto text_of = symbol<const char* (*)(void*)>("PyUnicode_AsUTF8");
    const auto release_ref = symbol<void (*)(void*)>("Py_DecRef");
    if (initialized == nullptr || ensure == nullptr || release == nullptr || current_frame == nullptr ||
        line_of == nullptr || code_of == nullptr || attribute == nullptr || text_of == nullptr ||
        release_ref == nullptr || initialized() == 0) {
        return std::nullopt;
    }
    const int state = ensure();
    std::optional<std::string> site;
    if (void* frame = current_frame(); frame != nullptr) {  // borrowed
        void* code = code_of(frame);                        // new references from here on
        void* file = code != nullptr ? attribute(code, "co_filename") : nullptr;
        void* name = code != nullptr ? attribute(code, "co_name") : nullptr;
        const char* file_text = file != nullptr ? text_of(file) : nullptr;
        const char* name_text = name != nullptr ? text_of(name) : nullptr;
        if (file_text != nullptr) {
            site = fmt::format("{} ({}:{})", name_text != nullptr ? name_text : "??", file_text, line_of(frame));
        }
        for (void* object : {name, file, code}) {
            if (object != nullptr) release_ref(object);
        }
    }
    release(state);
    return site;
}

std::string report_call_site(const void* return_address) {
    if (return_address != nullptr) {
        const base::SourceLocation& where = base::symbolize_return_address(return_address);
        if (!where.file.empty() && where.line != 0) return base::describe_call_site(return_address);
    }
    if (auto python = python_call_site()) return *python;
    return base::describe_call_site(return_address);
}

}  // namespace lockstep::check
