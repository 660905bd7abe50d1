#include "errors.hpp"

#include "mpi_launcher/display_text.hpp"

#include <fmt/format.h>

namespace lockstep::hostcheck {

HostfileError::HostfileError(std::vector<LineError> errors)
    : Error([&] {
          std::string text;
          for (const auto& e : errors) {
              if (!text.empty()) text += '\n';
              // A line can be megabytes long; the message repeats its start, and says how much it left out.
              text += e.line > 0
                          ? fmt::format("{}:{}: {}: '{}'", e.path, e.line, e.message, mpi_launcher::cut_value(e.text))
                          : fmt::format("{}: {}", e.path, e.message);
          }
          return text;
      }()),
      errors_(std::move(errors)) {}

HostfileError::HostfileError(std::string path, std::string message)
    : Error(fmt::format("{}: {}", path, message)), errors_{LineError{std::move(path), 0, "", std::move(message)}} {}

}  // namespace lockstep::hostcheck
