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

enum class Category : unsigned char { Floating, Integral, Boolean, Complex };

struct DTypeInfo {
    DType dtype;
    std::string_view name;
    std::size_t size;
    Category category;
};

// The one table of element types (their MPI types: mpi_datatype in runtime.hpp).
const std::array<DTypeInfo, 15> dtype_table = {{
    {DType::Float32, "float32", 4, Category::Floating},
    {DType::Float64, "float64", 8, Category::Floating},
    {DType::Float16, "float16", 2, Category::Floating},
    {DType::BFloat16, "bfloat16", 2, Category::Floating},
    {DType::Int8, "int8", 1, Category::Integral},
    {DType::UInt8, "uint8", 1, Category::Integral},
    {DType::Int32, "int32", 4, Category::Integral},
    {DType::Int64, "int64", 8, Category::Integral},
    {DType::Bool, "bool", 1, Category::Boolean},
    {DType::Int16, "int16", 2, Category::Integral},
    {DType::UInt16, "uint16", 2, Category::Integral},
    {DType::UInt32, "uint32", 4, Category::Integral},
    {DType::UInt64, "uint64", 8, Category::Integral},
    {DType::Complex64, "complex64", 8, Category::Complex},
    {DType::Complex128, "complex128", 16, Category::Complex},
}};
static_assert(std::size(all_dtypes) == 15);

// An out-of-range value (a corrupt wire signature) reads as this entry.
constexpr DTypeInfo unknown_dtype{DType::Float32, "unknown", 0, Category::Boolean};

const DTypeInfo& info(DType dtype) noexcept {
    const auto i = static_cast<std::size_t>(dtype);
    return i < dtype_table.size() ? dtype_table[i] : unknown_dtype;
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
bool is_complex(DType dtype) noexcept {
    return info(dtype).category == Category::Complex;
}
DType real_dtype(DType dtype) noexcept {
    if (dtype == DType::Complex64) return DType::Float32;
    if (dtype == DType::Complex128) return DType::Float64;
    return dtype;
}

DType parse_dtype(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const auto& entry : dtype_table) {
        if (entry.name == lower) return entry.dtype;
    }
    static const std::array<std::pair<std::string_view, DType>, 9> aliases = {{
        {"float", DType::Float32},
        {"double", DType::Float64},
        {"half", DType::Float16},
        {"int", DType::Int32},
        {"long", DType::Int64},
        {"bf16", DType::BFloat16},
        {"short", DType::Int16},
        {"cfloat", DType::Complex64},
        {"cdouble", DType::Complex128},
    }};
    for (const auto& [alias, dtype] : aliases) {
        if (alias == lower) return dtype;
    }
    throw DTypeError(
        fmt::format("unknown dtype '{}': expected one of float32, float64, float16, bfloat16, int8, "
                    "uint8, int16, uint16, int32, uint32, int64, uint64, bool, complex64, complex128",
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
