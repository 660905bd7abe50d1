#pragma once
// Boost.Test global fixture for tests run under mpirun: lockstep owns MPI for the whole test module.

#include <lockstep.hpp>

namespace lockstep_test {
struct RuntimeFixture {
    RuntimeFixture() { lockstep::Runtime::init(); }
    ~RuntimeFixture() { lockstep::Runtime::finalize(); }
    RuntimeFixture(const RuntimeFixture&) = delete;
    RuntimeFixture& operator=(const RuntimeFixture&) = delete;
};
}  // namespace lockstep_test
