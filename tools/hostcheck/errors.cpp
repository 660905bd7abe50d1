#include "errors.hpp"

#include <fmt/format.h>

namespace lockstep::hostcheck {

HostfileError::HostfileError(std::vector<LineError> errors)
    : Error([&] {
          std::string text;
          for (const auto& e : errors) {
              if (!text.empty()) text += '\n';
              text += fmt::format("{}:{}: {}: '{}'", e.path, e.line, e.message, e.text);
          }
          return text;
      }()),
      errors_(std::move(errors)) {}

HostfileError::HostfileError(std::string path, std::string message)
    : Error(fmt::format("{}: {}", path, message)), errors_{LineError{std::move(path), 0, "", std::move(message)}} {}

}  // namespace lockstep::hostcheck
