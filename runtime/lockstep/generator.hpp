#pragma once
// A seeded random generator for tensor factories. SplitMix64 seeding into xoshiro256**, and our own uniform and
// Box-Muller normal transforms, so that the same seed gives bitwise-identical tensors on every platform and standard
// library. CUDA tensors are drawn on the host and copied, so they match CPU tensors bit for bit.

#include <lockstep/export.hpp>

#include <cstdint>

namespace lockstep {

class LOCKSTEP_API Generator {
public:
    explicit Generator(std::uint64_t seed = 0) { manual_seed(seed); }
    void manual_seed(std::uint64_t seed);
    [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }

    std::uint64_t next_u64();
    double next_uniform();  // [0, 1) with 53 random bits
    double next_normal();   // standard normal

private:
    std::uint64_t seed_ = 0;
    std::uint64_t state_[4] = {};
    bool has_spare_normal_ = false;
    double spare_normal_ = 0.0;
};

// The generator that factories use when none is passed. Seeded from Config `seed` when first used.
[[nodiscard]] LOCKSTEP_API Generator& default_generator();

// Seeds every lockstep generator (the default generator, which CUDA tensors draw from too, so CPU and CUDA tensors of
// the same seed are bitwise identical) and the C library's rand(). With device_specific, each process adds its rank,
// so that processes draw different streams (dropout masks, data augmentation) that are still reproducible.
LOCKSTEP_API void set_seed(std::uint64_t seed, bool device_specific = false);

}  // namespace lockstep
