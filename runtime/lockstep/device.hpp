#pragma once
// Where a tensor's memory lives: the host ("cpu") or one CUDA device ("cuda:N").

#include <lockstep/export.hpp>

#include <iosfwd>
#include <string>
#include <string_view>

namespace lockstep {

enum class DeviceType : unsigned char { CPU, CUDA };

class LOCKSTEP_API Device {
public:
    constexpr Device() = default;  // cpu
    constexpr Device(DeviceType type, int index) : type_(type), index_(type == DeviceType::CPU ? 0 : index) {}

    static constexpr Device cpu() { return {}; }
    static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
    // Parses "cpu", "cuda" (device 0) or "cuda:N"; anything else throws DeviceError quoting the string.
    static Device parse(std::string_view text);

    [[nodiscard]] constexpr DeviceType type() const { return type_; }
    [[nodiscard]] constexpr int index() const { return index_; }
    [[nodiscard]] constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
    [[nodiscard]] constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
    [[nodiscard]] std::string str() const;  // "cpu" or "cuda:N"

    friend constexpr bool operator==(Device a, Device b) = default;

private:
    DeviceType type_ = DeviceType::CPU;
    int index_ = 0;
};

LOCKSTEP_API std::ostream& operator<<(std::ostream& os, Device device);

// Number of CUDA devices usable by this process: 0 in a build without CUDA, or when no driver or device is present.
[[nodiscard]] LOCKSTEP_API int cuda_device_count();
// True when this library was built with CUDA support.
[[nodiscard]] LOCKSTEP_API bool cuda_built() noexcept;

}  // namespace lockstep
