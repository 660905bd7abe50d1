#pragma once
// Boost.Test global fixture for tests run under mpirun: lockstep owns MPI for the whole test module; and the world
// communicator's comm(), N() and R() every multi-rank test uses.

#include <lockstep.hpp>

namespace lockstep_test {
struct RuntimeFixture {
    RuntimeFixture() { lockstep::Runtime::init(); }
    ~RuntimeFixture() { lockstep::Runtime::finalize(); }
    RuntimeFixture(const RuntimeFixture&) = delete;
    RuntimeFixture& operator=(const RuntimeFixture&) = delete;
};

// The world communicator of a test run under mpirun, its size and this process's rank.
inline lockstep::Communicator& comm() {
    return lockstep::Communicator::world();
}
inline int N() {
    return comm().size();
}
inline int R() {
    return comm().rank();
}
}  // namespace lockstep_test
