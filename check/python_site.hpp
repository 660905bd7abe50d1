#pragma once
// The Python line a process is at, for reports about calls a Python program made (through mpi4py): the C call site
// is then inside mpi4py's extension module, which says nothing to the program's author.

#include <optional>
#include <string>

namespace lockstep::check {

// "function (file.py:line)" of the innermost Python frame of this thread, when this process runs Python; nullopt
// otherwise. The Python C API is looked up at run time (dlsym): the library does not link Python. Takes the GIL.
[[nodiscard]] std::optional<std::string> python_call_site();

// The call site a report shows for a call that returns to `return_address`: the symbolized C site, or the Python
// line when the C site has no source line and this process runs Python.
[[nodiscard]] std::string report_call_site(const void* return_address);

}  // namespace lockstep::check
