#pragma once
// Return addresses to source locations: the function, and the file and line where the module has debug information
// (Boost.Stacktrace over libbacktrace). Each address is resolved once and cached for the life of the process.

#include <string>

namespace lockstep::base {

struct SourceLocation {
    std::string function;    // demangled; empty when the module exports no name for it and has no debug information
    std::string file;        // empty without debug information
    unsigned line = 0;       // 0 without debug information
    std::string module;      // the executable or shared library that holds the address ("/path/app")
    std::size_t offset = 0;  // the address relative to the module's load address
};

// Where the call that returns to `return_address` was made (the address of a call instruction's successor, as
// __builtin_return_address gives it). Thread-safe; the reference stays valid for the life of the process.
[[nodiscard]] const SourceLocation& symbolize_return_address(const void* return_address);

// The call site as reports show it: "function (file:line)", "function (module+0xoffset)" without debug information,
// "?? (module+0xoffset)" without a name either, "an unknown call site" for a null address.
[[nodiscard]] std::string describe_call_site(const void* return_address);

}  // namespace lockstep::base
