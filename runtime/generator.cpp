#include <lockstep/config.hpp>
#include <lockstep/generator.hpp>
#include <lockstep/runtime.hpp>

#include <cstdlib>

#include <cmath>
#include <numbers>

namespace lockstep {

namespace {
std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
constexpr std::uint64_t rotl(std::uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}
}  // namespace

void Generator::manual_seed(std::uint64_t seed) {
    seed_ = seed;
    std::uint64_t sm = seed;
    for (auto& word : state_) word = splitmix64(sm);
    has_spare_normal_ = false;
}

std::uint64_t Generator::next_u64() {
    // xoshiro256** (Blackman and Vigna): 256 bits of state, period 2^256 - 1.
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
}

double Generator::next_uniform() {
    return static_cast<double>(next_u64() >> 11) * 0x1p-53;
}

double Generator::next_normal() {
    // Box-Muller: two uniforms give two independent normals; the second is kept for the next call.
    if (has_spare_normal_) {
        has_spare_normal_ = false;
        return spare_normal_;
    }
    const double u1 = 1.0 - next_uniform();  // (0, 1]: log stays finite
    const double u2 = next_uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_normal_ = radius * std::sin(angle);
    has_spare_normal_ = true;
    return radius * std::cos(angle);
}

Generator& default_generator() {
    static Generator generator(config().seed);
    return generator;
}

void set_seed(std::uint64_t seed, bool device_specific) {
    const std::uint64_t effective = device_specific ? seed + static_cast<std::uint64_t>(current_identity().rank) : seed;
    default_generator().manual_seed(effective);
    std::srand(static_cast<unsigned>(effective));
}

}  // namespace lockstep
