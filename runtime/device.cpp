#include <lockstep/build_config.hpp>
#include <lockstep/device.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>

#include <charconv>
#include <ostream>

namespace lockstep {

Device Device::parse(std::string_view text) {
    if (text == "cpu") return cpu();
    if (text == "cuda") return cuda(0);
    constexpr std::string_view prefix = "cuda:";
    if (text.starts_with(prefix)) {
        std::string_view digits = text.substr(prefix.size());
        int index = -1;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0) {
            return cuda(index);
        }
    }
    throw DeviceError(fmt::format("invalid device '{}': expected \"cpu\", \"cuda\" or \"cuda:N\" with N >= 0", text));
}

std::string Device::str() const {
    return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index_);
}

std::ostream& operator<<(std::ostream& os, Device device) {
    return os << device.str();
}

bool cuda_built() noexcept {
    return LOCKSTEP_HAVE_CUDA != 0;
}

}  // namespace lockstep
