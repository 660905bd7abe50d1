#pragma once
// clang 14 has no __builtin_source_location, so libstdc++ 12's <source_location> declares nothing under it and
// <lockstep/errors.hpp> does not compile. run-fuzzers.sh force-includes this file into clang 14 builds only: the
// same interface, built from the older builtins clang 14 has.
#include <source_location>

#if !defined(__cpp_lib_source_location)
namespace std {
struct source_location {
    static constexpr source_location current(const char* file = __builtin_FILE(),
                                             const char* function = __builtin_FUNCTION(),
                                             unsigned line = __builtin_LINE(),
                                             unsigned column = __builtin_COLUMN()) noexcept {
        source_location where;
        where.file_ = file;
        where.function_ = function;
        where.line_ = line;
        where.column_ = column;
        return where;
    }
    [[nodiscard]] constexpr const char* file_name() const noexcept { return file_; }
    [[nodiscard]] constexpr const char* function_name() const noexcept { return function_; }
    [[nodiscard]] constexpr unsigned line() const noexcept { return line_; }
    [[nodiscard]] constexpr unsigned column() const noexcept { return column_; }

private:
    const char* file_ = "";
    const char* function_ = "";
    unsigned line_ = 0;
    unsigned column_ = 0;
};
}  // namespace std
#endif
