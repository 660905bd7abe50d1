#include <lockstep/dtype.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>
#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <ostream>
#include <string>

namespace lockstep {

namespace {

enum class Category : unsigned char { Floating, Integral, Boolean };

struct DTypeInfo {
    DType dtype;
    std::string_view name;
    std::size_t size;
    Category category;
};

// The one table of element types (their MPI types: mpi_datatype in runtime.hpp).
const std::array<DTypeInfo, 9> dtype_table = {{
    {DType::Float32, "float32", 4, Category::Floating},
    {DType::Float64, "float64", 8, Category::Floating},
    {DType::Float16, "float16", 2, Category::Floating},
    {DType::BFloat16, "bfloat16", 2, Category::Floating},
    {DType::Int8, "int8", 1, Category::Integral},
    {DType::UInt8, "uint8", 1, Category::Integral},
    {DType::Int32, "int32", 4, Category::Integral},
    {DType::Int64, "int64", 8, Category::Integral},
    {DType::Bool, "bool", 1, Category::Boolean},
}};

const DTypeInfo& info(DType dtype) noexcept {
    return dtype_table[static_cast<std::size_t>(dtype)];
}

}  // namespace

std::string_view dtype_name(DType dtype) noexcept {
    return info(dtype).name;
}
std::size_t dtype_size(DType dtype) noexcept {
    return info(dtype).size;
}
bool is_floating(DType dtype) noexcept {
    return info(dtype).category == Category::Floating;
}
bool is_integral(DType dtype) noexcept {
    return info(dtype).category == Category::Integral;
}

DType parse_dtype(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const auto& entry : dtype_table) {
        if (entry.name == lower) return entry.dtype;
    }
    static const std::array<std::pair<std::string_view, DType>, 6> aliases = {{
        {"float", DType::Float32},
        {"double", DType::Float64},
        {"half", DType::Float16},
        {"int", DType::Int32},
        {"long", DType::Int64},
        {"bf16", DType::BFloat16},
    }};
    for (const auto& [alias, dtype] : aliases) {
        if (alias == lower) return dtype;
    }
    throw DTypeError(
        fmt::format("unknown dtype '{}': expected one of float32, float64, float16, bfloat16, int8, "
                    "uint8, int32, int64, bool",
                    name));
}

std::ostream& operator<<(std::ostream& os, DType dtype) {
    return os << dtype_name(dtype);
}

// Eigen's half and bfloat16 implement IEEE round-to-nearest-even conversions; our types share their bit layout.
float16::float16(float value) noexcept : bits(std::bit_cast<std::uint16_t>(Eigen::half(value))) {}
float16::operator float() const noexcept {
    return static_cast<float>(std::bit_cast<Eigen::half>(bits));
}
bfloat16::bfloat16(float value) noexcept : bits(std::bit_cast<std::uint16_t>(Eigen::bfloat16(value))) {}
bfloat16::operator float() const noexcept {
    return static_cast<float>(std::bit_cast<Eigen::bfloat16>(bits));
}

}  // namespace lockstep
