#pragma once
// The errors of `lockstep hostcheck` that end a run before any host is checked. Both mean exit code 2 (usage or
// hostfile error); problems found on hosts are results, not exceptions. An interrupted run ends with
// mpi_launcher::InterruptedError, thrown where the children are run.

#include <lockstep/errors.hpp>

#include <string>
#include <vector>

namespace lockstep::hostcheck {

// One line of a hostfile that cannot be read: where it is, what it says and why it was refused.
struct LineError {
    std::string path;
    int line = 0;
    std::string text;
    std::string message;
};

// A hostfile that cannot be used: unreadable, empty, or with malformed lines (all of them are listed, not only the
// first, so that one edit fixes the file).
class HostfileError : public Error {
public:
    explicit HostfileError(std::vector<LineError> errors);
    HostfileError(std::string path, std::string message);
    [[nodiscard]] const std::vector<LineError>& errors() const noexcept { return errors_; }

private:
    std::vector<LineError> errors_;
};

// A command line that asks for something impossible (a fan-out of 0, an ssh command that is not installed).
class UsageError : public Error {
public:
    using Error::Error;
};

}  // namespace lockstep::hostcheck
