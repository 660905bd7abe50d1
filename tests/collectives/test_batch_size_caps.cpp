// Run as an MPMD job where each rank has its own LOCKSTEP_CPU_MEMORY_LIMIT: the real allocator runs out of memory on
// the rank with the smallest cap only, and every rank still ends on the same batch size.
#define BOOST_TEST_MODULE batch_size_caps
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "runtime_fixture.hpp"

using namespace lockstep;

namespace {
constexpr std::int64_t MiB = std::int64_t{1} << 20;
}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(unequal_caps_agree_on_one_batch_size) {
    Communicator& comm = Communicator::world();
    const auto cap = allocator_for(Device::cpu()).stats().limit_bytes;
    BOOST_REQUIRE(cap.has_value());
    // The caps differ between ranks: the launcher gave each rank its own.
    const auto caps =
        comm.allgather(Tensor::full({}, static_cast<double>(*cap), DType::Int64)).to_vector<std::int64_t>();
    const std::int64_t smallest = *std::min_element(caps.begin(), caps.end());
    BOOST_TEST(*std::max_element(caps.begin(), caps.end()) > smallest);

    const std::size_t allocated_before = allocator_for(Device::cpu()).stats().allocated_bytes;
    int my_ooms = 0;
    // A step needs `size` MiB of activations: blocks of 2 MiB, as a real model would allocate.
    const auto result = find_executable_batch_size(128, [&](std::int64_t size) {
        try {
            std::vector<Tensor> activations;
            for (std::int64_t i = 0; i < size / 2; ++i) activations.push_back(Tensor::zeros({2 * MiB}, DType::UInt8));
        } catch (const OutOfMemoryError&) {
            ++my_ooms;
            throw;
        }
    });
    // Nothing of the search is still allocated.
    BOOST_TEST(allocator_for(Device::cpu()).stats().allocated_bytes == allocated_before);
    // The largest power-of-two fraction of 128 MiB that fits in the smallest cap.
    std::int64_t expected = 128;
    while (expected * MiB > smallest) expected /= 2;
    BOOST_TEST(result.batch_size == expected);
    const auto sizes = comm.allgather(Tensor::full({}, static_cast<double>(result.batch_size), DType::Int64));
    for (auto s : sizes.to_vector<std::int64_t>()) BOOST_TEST(s == expected);
    // Only ranks with the smallest cap ran out of memory themselves; the others retried because they were told to.
    if (static_cast<std::int64_t>(*cap) >= 256 * MiB) BOOST_TEST(my_ooms == 0);
    if (static_cast<std::int64_t>(*cap) == smallest) BOOST_TEST(my_ooms == result.out_of_memory_retries);
}
