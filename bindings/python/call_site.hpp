#pragma once
// The caller's place of a collective: the first Python frame outside this package and outside torch/distributed, so
// that the debug-mode report and the watchdog point at the user's file:line and not at a wrapper; and the per-call
// options (place, report tag, stream) built from it.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "arguments.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace lockstep_python {

namespace py = pybind11;

// The caller's place. The strings belong to the caller's code object (PyUnicode_AsUTF8 keeps its UTF-8 form), which
// lives as long as the caller's frame, and that frame waits in this call: the pointers stay valid while the GIL is
// released, and the C library copies them once per distinct place.
struct CallSite {
    const char* file = nullptr;
    int line = 0;
    const char* function = nullptr;
};

// Walks the Python stack from the innermost frame (with the GIL held).
CallSite caller_site();

using OptionalTag = std::optional<std::string>;
// A cudaStream_t as an integer (torch.cuda.current_stream().cuda_stream): lockstep orders the collective after the
// work pending on it instead of synchronising the device.
using OptionalStream = std::optional<uintptr_t>;

// The per-call options of one collective: the caller's place and the report tag, alive for the duration of the call.
class CallOptions {
public:
    CallOptions() : CallOptions(std::nullopt, std::nullopt) {}
    // The keywords of a call of `function`: the report tag (None or a str; its keyword is `tag_name`) and the stream
    // (None or an integer).
    CallOptions(const char* function, py::handle tag, const char* tag_name, py::handle stream)
        : CallOptions(to_optional_string(tag, {function, tag_name}),
                      to_optional_integer<uintptr_t>(stream, {function, "stream"})) {}
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
    const CallSite& site() const { return site_; }

private:
    CallSite site_;
    std::optional<std::string> tag_;
    lockstep_call_options_t options_ = LOCKSTEP_CALL_OPTIONS_INIT;
};

// _set_package_dirs and _caller_site.
void bind_call_site(py::module_& m);

}  // namespace lockstep_python
