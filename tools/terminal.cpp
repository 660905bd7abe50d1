#include "terminal.hpp"

#include <lockstep/runtime.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace lockstep::tools {

bool colour_wanted(const std::string& setting) {
    if (setting == "always") return true;
    if (setting == "never") return false;
    if (current_identity().source != "default") return false;
    const char* term = std::getenv("TERM");
    return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
           !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

}  // namespace lockstep::tools
