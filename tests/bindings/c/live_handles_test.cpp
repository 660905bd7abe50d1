// The C interface's set of live handles (bindings/c/live_handles.hpp): membership through growth and tombstones,
// bounded memory under endless churn, pointers no handle can have, the two kinds kept apart, and lookups without a lock
// while other threads insert and erase (every thread's own handles always read as they should, however the table
// grows or is rebuilt under it).
#define BOOST_TEST_MODULE live_handles
#include <boost/test/unit_test.hpp>

#include "live_handles.hpp"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

using lockstep::c_api::HandleKind;
using lockstep::c_api::LiveHandles;

namespace {

struct alignas(16) Object {
    std::int64_t payload[2];
};

}  // namespace

BOOST_AUTO_TEST_CASE(membership_through_growth_and_erasure) {
    LiveHandles set;
    std::vector<Object> objects(10000);
    for (Object& o : objects) set.insert(&o, HandleKind::Tensor);
    for (Object& o : objects) {
        BOOST_TEST(set.contains(&o, HandleKind::Tensor));
        BOOST_TEST(!set.contains(&o, HandleKind::Communicator));
    }
    for (std::size_t i = 0; i < objects.size(); i += 2) BOOST_TEST(set.erase(&objects[i], HandleKind::Tensor));
    for (std::size_t i = 0; i < objects.size(); ++i)
        BOOST_TEST(set.contains(&objects[i], HandleKind::Tensor) == (i % 2 == 1));
    BOOST_TEST(!set.erase(&objects[0], HandleKind::Tensor));  // erased already
    // Tombstones are reused and dropped by the next growth: churn does not fill the table.
    for (int round = 0; round < 50; ++round) {
        for (std::size_t i = 0; i < objects.size(); i += 2) set.insert(&objects[i], HandleKind::Tensor);
        for (std::size_t i = 0; i < objects.size(); i += 2)
            BOOST_TEST_REQUIRE(set.erase(&objects[i], HandleKind::Tensor));
    }
    for (std::size_t i = 1; i < objects.size(); i += 2) BOOST_TEST(set.contains(&objects[i], HandleKind::Tensor));
}

BOOST_AUTO_TEST_CASE(endless_churn_takes_bounded_memory) {
    LiveHandles set;
    std::vector<Object> objects(100);
    for (int round = 0; round < 20000; ++round) {
        for (Object& o : objects) set.insert(&o, HandleKind::Tensor);
        for (Object& o : objects) BOOST_TEST_REQUIRE(set.erase(&o, HandleKind::Tensor));
    }
    BOOST_TEST(set.arrays_made() <= 4U);  // 64 words, then 512 for the 100 at once
    for (Object& o : objects) BOOST_TEST(!set.contains(&o, HandleKind::Tensor));
}

BOOST_AUTO_TEST_CASE(pointers_no_handle_can_have) {
    LiveHandles set;
    Object o{};
    set.insert(&o, HandleKind::Communicator);
    BOOST_TEST(!set.contains(nullptr, HandleKind::Communicator));
    BOOST_TEST(!set.contains(reinterpret_cast<char*>(&o) + 3, HandleKind::Communicator));
    BOOST_TEST(!set.contains(reinterpret_cast<void*>(std::uintptr_t{3}), HandleKind::Tensor));
    BOOST_TEST(!set.contains(reinterpret_cast<void*>(std::uintptr_t{0x10}), HandleKind::Tensor));
    BOOST_TEST(!set.erase(nullptr, HandleKind::Tensor));
    BOOST_TEST(set.contains(&o, HandleKind::Communicator));
}

BOOST_AUTO_TEST_CASE(lookups_while_other_threads_insert_and_erase) {
    LiveHandles set;
    constexpr int threads = 4;
    constexpr int per_thread = 2000;
    std::vector<Object> permanent(64);
    for (Object& o : permanent) set.insert(&o, HandleKind::Communicator);
    std::atomic<bool> stop{false};
    std::atomic<int> wrong{0};
    std::thread reader([&] {
        while (!stop.load()) {
            for (Object& o : permanent) {
                if (!set.contains(&o, HandleKind::Communicator)) wrong.fetch_add(1);
            }
        }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t) {
        writers.emplace_back([&] {
            std::vector<Object> mine(per_thread);
            for (int round = 0; round < 20; ++round) {
                for (Object& o : mine) set.insert(&o, HandleKind::Tensor);
                for (Object& o : mine) {
                    if (!set.contains(&o, HandleKind::Tensor)) wrong.fetch_add(1);
                }
                for (Object& o : mine) {
                    if (!set.erase(&o, HandleKind::Tensor)) wrong.fetch_add(1);
                    if (set.contains(&o, HandleKind::Tensor)) wrong.fetch_add(1);
                }
            }
        });
    }
    for (std::thread& w : writers) w.join();
    stop.store(true);
    reader.join();
    BOOST_TEST(wrong.load() == 0);
    for (Object& o : permanent) BOOST_TEST(set.contains(&o, HandleKind::Communicator));
}
