// Run under mpirun with 2, 3 and 4 ranks: the flight recorder (collectives/recorder/). The snapshot after known calls
// (ops, shapes, dtypes, roots, call numbers equal on every rank, times in order), a call rejected in debug mode, a
// non-blocking collective and its wait, sends and receives, a communicator without a recorder, a ring that stays
// bounded (and the process's memory flat) over a million calls, and a reader thread that never sees a torn entry
// while calls go on.
#define BOOST_TEST_MODULE recorder_mpi
#include <boost/test/unit_test.hpp>

#include <collectives/recorder/recorder.hpp>
#include <collectives/recorder/trace_format.hpp>
#include <lockstep.hpp>
#include <lockstep/foreign_watch.hpp>

#include "runtime_fixture.hpp"

#include <atomic>
#include <fstream>
#include <thread>

using namespace lockstep;
using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;
using nlohmann::json;

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

namespace {

// The newest communicator of a snapshot (ids grow): of lockstep's own, or of those the check library watches (their
// ids have the top bit set).
const json& newest(const json& snap, bool watched = false) {
    const json* best = nullptr;
    for (const auto& c : snap["communicators"]) {
        const std::uint64_t id = c["id"].get<std::uint64_t>();
        if ((id >> 63 != 0) != watched) continue;
        if (best == nullptr || id > (*best)["id"].get<std::uint64_t>()) best = &c;
    }
    BOOST_REQUIRE(best != nullptr);
    return *best;
}
std::vector<json> calls_of(const json& snap, std::uint64_t id) {
    std::vector<json> out;
    for (const auto& c : snap["calls"]) {
        if (c["comm"].get<std::uint64_t>() == id) out.push_back(c);
    }
    return out;
}

// Whether every rank has the same value.
bool same_everywhere(std::int64_t value) {
    Tensor t = Tensor::full({1}, static_cast<double>(value), DType::Int64);
    const Tensor hi = comm().allreduce(t, ReduceOp::Max);
    const Tensor lo = comm().allreduce(t, ReduceOp::Min);
    return hi.to_vector<std::int64_t>()[0] == value && lo.to_vector<std::int64_t>()[0] == value;
}

void check_times(const json& c) {
    BOOST_TEST_CONTEXT(c.dump()) {
        const double issued = c["issued_us"].get<double>();
        BOOST_REQUIRE(!c["completed_us"].is_null());
        const double completed = c["completed_us"].get<double>();
        BOOST_TEST(issued <= completed);
        if (!c["payload_us"].is_null()) {
            BOOST_TEST(issued <= c["payload_us"].get<double>());
            BOOST_TEST(c["payload_us"].get<double>() <= completed);
        }
        if (!c["signature_us"].is_null()) BOOST_TEST(c["signature_us"].get<double>() <= completed);
    }
}

// Resident pages of this process (/proc/self/statm's second field).
std::int64_t resident_pages() {
    std::ifstream in("/proc/self/statm");
    std::int64_t size = 0, resident = 0;
    in >> size >> resident;
    return resident;
}

}  // namespace

BOOST_AUTO_TEST_CASE(snapshot_names_the_process_and_its_communicators) {
    comm().barrier();  // the world communicator is made at its first use
    const json snap = detail::recorder_snapshot();
    BOOST_TEST(snap["rank"].get<int>() == R());
    BOOST_TEST(snap["pid"].get<int>() == static_cast<int>(::getpid()));
    BOOST_TEST(!snap["host"].get<std::string>().empty());
    BOOST_TEST(snap["capacity"].get<int>() == 2048);
    BOOST_TEST(snap["snapshot_us"].get<double>() > 1.6e15);  // CLOCK_REALTIME microseconds, after 2020
    bool world = false;
    for (const auto& c : snap["communicators"]) {
        if (c["name"] == "world") {
            world = true;
            BOOST_TEST(c["size"].get<int>() == N());
            BOOST_TEST(c["rank"].get<int>() == R());
            BOOST_TEST(c["world_ranks"].size() == static_cast<std::size_t>(N()));
        }
    }
    BOOST_TEST(world, snap["communicators"].dump());
    const json& profile = snap["profile"];
    BOOST_TEST(profile["wait_us"].size() == 256u);
    BOOST_TEST(profile["calls"].size() == 256u);
    BOOST_TEST(profile["bin_us"].get<double>() > 0.0);
}

BOOST_AUTO_TEST_CASE(known_collectives_are_recorded_alike_on_every_rank) {
    Communicator c(comm().mpi_comm());
    Tensor x = Tensor::full({4}, 1.0, DType::Float32);
    c.set_step(7);
    (void)c.allreduce(x);
    Tensor b = Tensor::full({2, 3}, 2.0, DType::Int64);
    c.broadcast_(b, N() - 1);
    c.barrier();
    const json snap = detail::recorder_snapshot();
    const json& made = newest(snap);
    BOOST_TEST(made["size"].get<int>() == N());
    BOOST_TEST(made["rank"].get<int>() == R());
    const std::vector<json> calls = calls_of(snap, made["id"].get<std::uint64_t>());
    BOOST_REQUIRE_EQUAL(calls.size(), 3u);
    BOOST_TEST(calls[0]["op"] == "allreduce");
    BOOST_TEST(calls[0]["kind"] == "collective");
    BOOST_TEST(calls[0]["dtype"] == "float32");
    BOOST_TEST(calls[0]["shape"] == json::array({4}));
    BOOST_TEST(calls[0]["count"].get<int>() == 4);
    BOOST_TEST(calls[0]["bytes"].get<int>() == 16);
    BOOST_TEST(calls[0]["root"].get<int>() == -1);
    BOOST_TEST(calls[0]["step"].get<int>() == 7);
    BOOST_TEST(calls[0]["nonblocking"] == false);
    BOOST_TEST(calls[0]["outcome"] == "ok");
    BOOST_TEST(calls[0]["file"].get<std::string>().ends_with("test_recorder_mpi.cpp"));
    BOOST_TEST(calls[0]["site"].get<std::string>().starts_with("test_recorder_mpi.cpp:"));
    BOOST_TEST(calls[1]["op"] == "broadcast");
    BOOST_TEST(calls[1]["dtype"] == "int64");
    BOOST_TEST(calls[1]["shape"] == json::array({2, 3}));
    BOOST_TEST(calls[1]["bytes"].get<int>() == 48);
    BOOST_TEST(calls[1]["root"].get<int>() == N() - 1);
    BOOST_TEST(calls[2]["op"] == "barrier");
    BOOST_TEST(calls[2]["dtype"].is_null());
    BOOST_TEST(calls[2]["shape"].is_null());
    for (std::size_t i = 0; i < calls.size(); ++i) {
        check_times(calls[i]);
        BOOST_TEST(calls[i]["signature_us"].is_null());  // debug mode off
        if (i > 0) BOOST_TEST(calls[i]["seq"].get<std::int64_t>() == calls[i - 1]["seq"].get<std::int64_t>() + 1);
        BOOST_TEST(same_everywhere(calls[i]["seq"].get<std::int64_t>()));
    }
    BOOST_TEST(same_everywhere(made["id"].get<std::int64_t>()));
}

BOOST_AUTO_TEST_CASE(a_rejected_call_in_debug_mode_has_an_error_outcome) {
    Communicator c(comm().mpi_comm(), {.debug = true});
    Tensor x = Tensor::full({R() == 0 ? 4 : 5}, 1.0, DType::Float32);
    BOOST_CHECK_THROW((void)c.allreduce(x), SignatureMismatchError);
    Tensor y = Tensor::full({2}, 1.0, DType::Float32);
    BOOST_CHECK_THROW(c.broadcast_(y, N() + 3), InvalidArgumentError);
    (void)c.allreduce(y);
    const json snap = detail::recorder_snapshot();
    const std::vector<json> calls = calls_of(snap, newest(snap)["id"].get<std::uint64_t>());
    BOOST_REQUIRE_EQUAL(calls.size(), 3u);
    BOOST_TEST(calls[0]["outcome"] == "error");
    BOOST_TEST(calls[0]["error"] == "lockstep::SignatureMismatchError");
    BOOST_TEST(calls[0]["payload_us"].is_null());  // the exchange found the mismatch: no payload moved
    BOOST_TEST(calls[1]["outcome"] == "error");
    BOOST_TEST(calls[1]["error"] == "lockstep::InvalidArgumentError");
    BOOST_TEST(calls[2]["outcome"] == "ok");
    BOOST_TEST(!calls[2]["signature_us"].is_null());
    check_times(calls[2]);
    BOOST_TEST(calls[2]["issued_us"].get<double>() <= calls[2]["signature_us"].get<double>());
    BOOST_TEST(calls[2]["signature_us"].get<double>() <= calls[2]["payload_us"].get<double>());
    BOOST_TEST(same_everywhere(calls[2]["seq"].get<std::int64_t>()));
}

BOOST_AUTO_TEST_CASE(non_blocking_collectives_have_a_waited_time) {
    for (bool thread : {true, false}) {
        BOOST_TEST_CONTEXT("progress thread " << thread) {
            Communicator c(comm().mpi_comm(), {.progress_thread = thread});
            Tensor x = Tensor::full({3}, 1.0, DType::Float64);
            Work w = c.iallreduce(x);
            w.wait();
            c.barrier();
            const json snap = detail::recorder_snapshot();
            const std::vector<json> calls = calls_of(snap, newest(snap)["id"].get<std::uint64_t>());
            BOOST_REQUIRE_EQUAL(calls.size(), 2u);
            const json& a = calls[0];
            BOOST_TEST(a["op"] == "allreduce");
            BOOST_TEST(a["nonblocking"] == true);
            BOOST_TEST(a["shape"] == json::array({3}));
            check_times(a);
            BOOST_REQUIRE(!a["waited_us"].is_null());
            BOOST_TEST(a["completed_us"].get<double>() <= a["waited_us"].get<double>());
            BOOST_TEST(calls[1]["nonblocking"] == false);
            BOOST_TEST(calls[1]["waited_us"].is_null());
            BOOST_TEST(same_everywhere(a["seq"].get<std::int64_t>()));
        }
    }
}

BOOST_AUTO_TEST_CASE(on_timeout_raise_records_blocking_calls_as_blocking) {
    // Raise mode runs every collective on the progress thread while a blocking caller waits for it: the trace must
    // still draw the blocking calls as blocking (their last arrivers and flows), the non-blocking ones as non-blocking.
    Communicator c(comm().mpi_comm(), {.timeout = 60.0, .progress_thread = true, .on_timeout = OnTimeout::Raise});
    BOOST_REQUIRE(c.on_timeout() == OnTimeout::Raise);
    Tensor x = Tensor::full({2}, 1.0, DType::Float32);
    c.allreduce_(x);
    Work w = c.iallreduce(x);
    w.wait();
    c.barrier();
    const json snap = detail::recorder_snapshot();
    const std::vector<json> calls = calls_of(snap, newest(snap)["id"].get<std::uint64_t>());
    BOOST_REQUIRE_EQUAL(calls.size(), 3u);
    BOOST_TEST(calls[0]["op"] == "allreduce");
    BOOST_TEST(calls[0]["nonblocking"] == false);
    BOOST_TEST(calls[1]["op"] == "allreduce");
    BOOST_TEST(calls[1]["nonblocking"] == true);
    BOOST_TEST(calls[2]["op"] == "barrier");
    BOOST_TEST(calls[2]["nonblocking"] == false);
    for (const auto& call : calls) check_times(call);
}

BOOST_AUTO_TEST_CASE(sends_and_receives_are_recorded) {
    Communicator c(comm().mpi_comm());
    const int next = (R() + 1) % N();
    const int prev = (R() + N() - 1) % N();
    Tensor out = Tensor::full({5}, static_cast<double>(R()), DType::Int32);
    Tensor in = Tensor::empty({5}, DType::Int32);
    if (R() % 2 == 0) {
        c.send(out, next, 3);
        c.recv(in, prev, 3);
    } else {
        c.recv(in, prev, 3);
        c.send(out, next, 3);
    }
    Tensor in2 = Tensor::empty({5}, DType::Int32);
    Work r = c.irecv(in2, prev, 4);
    Work s = c.isend(out, next, 4);
    s.wait();
    r.wait();
    const json snap = detail::recorder_snapshot();
    const std::vector<json> calls = calls_of(snap, newest(snap)["id"].get<std::uint64_t>());
    BOOST_REQUIRE_EQUAL(calls.size(), 4u);
    int sends = 0, recvs = 0;
    for (const auto& call : calls) {
        BOOST_TEST_CONTEXT(call.dump()) {
            check_times(call);
            BOOST_TEST(call["dtype"] == "int32");
            BOOST_TEST(call["bytes"].get<int>() == 20);
            BOOST_TEST(call["root"].get<int>() == -1);
            const bool nonblocking = call["nonblocking"].get<bool>();
            BOOST_TEST(call["tag"].get<int>() == (nonblocking ? 4 : 3));
            BOOST_TEST(call["waited_us"].is_null() == !nonblocking);
            BOOST_TEST(call["outcome"] == "ok");
            if (call["kind"] == "send") {
                ++sends;
                BOOST_TEST(call["op"] == "send");
                BOOST_TEST(call["peer"].get<int>() == next);
            } else {
                ++recvs;
                BOOST_TEST(call["kind"] == "recv");
                BOOST_TEST(call["peer"].get<int>() == prev);
            }
        }
    }
    BOOST_TEST(sends == 2);
    BOOST_TEST(recvs == 2);
}

BOOST_AUTO_TEST_CASE(a_failed_receive_has_an_error_outcome) {
    Communicator c(comm().mpi_comm());
    if (R() == 0) {
        c.send(Tensor::full({2}, 1.0, DType::Float32), 1, 5);
    } else if (R() == 1) {
        Tensor in = Tensor::empty({5}, DType::Float32);
        BOOST_CHECK_THROW(c.recv(in, 0, 5), ShapeError);  // two elements sent, five expected
    }
    const json snap = detail::recorder_snapshot();
    const std::vector<json> calls = calls_of(snap, newest(snap)["id"].get<std::uint64_t>());
    BOOST_REQUIRE_EQUAL(calls.size(), R() < 2 ? 1u : 0u);
    if (R() == 0) BOOST_TEST(calls[0]["outcome"] == "ok");
    if (R() == 1) {
        BOOST_TEST(calls[0]["kind"] == "recv");
        BOOST_TEST(calls[0]["outcome"] == "error");
        BOOST_TEST(calls[0]["error"] == "lockstep::ShapeError");
        check_times(calls[0]);
    }
}

BOOST_AUTO_TEST_CASE(trace_calls_zero_records_nothing) {
    const std::size_t before = detail::recorder_snapshot()["communicators"].size();
    {
        Communicator c(comm().mpi_comm(), {.trace_calls = 0});
        c.barrier();
        BOOST_TEST(detail::recorder_snapshot()["communicators"].size() == before);
    }
    BOOST_CHECK_THROW(Communicator(comm().mpi_comm(), {.trace_calls = (std::size_t{1} << 20) + 1}),
                      InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(a_freed_communicator_keeps_its_last_calls) {
    std::uint64_t id = 0;
    {
        Communicator c(comm().mpi_comm());
        c.barrier();
        id = newest(detail::recorder_snapshot())["id"].get<std::uint64_t>();
        BOOST_TEST(newest(detail::recorder_snapshot())["freed"] == false);
    }
    const json snap = detail::recorder_snapshot();
    BOOST_TEST(calls_of(snap, id).size() == 1u);
    for (const auto& c : snap["communicators"]) {
        if (c["id"] == id) BOOST_TEST(c["freed"] == true);
    }
}

BOOST_AUTO_TEST_CASE(a_freed_communicator_keeps_only_its_last_64_calls_in_snapshots) {
    // A dump must not grow with every communicator made and freed before it: the live one keeps its whole ring.
    constexpr int made = 300;
    std::uint64_t id = 0;
    {
        Communicator c(comm().mpi_comm());
        for (int i = 0; i < made; ++i) c.barrier();
        const json live = detail::recorder_snapshot();
        id = newest(live)["id"].get<std::uint64_t>();
        BOOST_TEST(calls_of(live, id).size() == static_cast<std::size_t>(made));
        BOOST_TEST(newest(live)["dropped"].get<std::int64_t>() == 0);
    }
    const json snap = detail::recorder_snapshot();
    const std::vector<json> calls = calls_of(snap, id);
    BOOST_REQUIRE_EQUAL(calls.size(), 64u);
    BOOST_TEST(calls.front()["seq"].get<std::int64_t>() == made - 63);
    BOOST_TEST(calls.back()["seq"].get<std::int64_t>() == made);
    for (const auto& c : snap["communicators"]) {
        if (c["id"] != id) continue;
        BOOST_TEST(c["recorded"].get<std::int64_t>() == made);
        BOOST_TEST(c["dropped"].get<std::int64_t>() == made - 64);
    }
}

BOOST_AUTO_TEST_CASE(the_ring_stays_bounded_over_a_million_calls) {
    Communicator self = comm().split(R(), 0);  // one process: its calls cost no messages
    BOOST_REQUIRE_EQUAL(self.size(), 1);
    Tensor x = Tensor::full({1}, 1.0, DType::Float32);
    constexpr int capacity = 2048;
    constexpr int total = 1000000;
    for (int i = 0; i < capacity; ++i) self.allreduce_(x);
    const std::int64_t filled = resident_pages();
    for (int i = capacity; i < total; ++i) self.allreduce_(x);
    const std::int64_t after = resident_pages();
    const json snap = detail::recorder_snapshot();
    const json& made = newest(snap);
    BOOST_TEST(made["recorded"].get<std::int64_t>() == total);
    BOOST_TEST(made["dropped"].get<std::int64_t>() == total - capacity);
    const std::vector<json> calls = calls_of(snap, made["id"].get<std::uint64_t>());
    BOOST_TEST(calls.size() == static_cast<std::size_t>(capacity));
    BOOST_TEST(calls.back()["seq"].get<std::int64_t>() == total);
    BOOST_TEST(calls.front()["seq"].get<std::int64_t>() == total - capacity + 1);
    // Flat: a few MiB of slack for the allocator and MPI, far below the 200+ MiB that a million kept entries take.
    const std::int64_t page = ::sysconf(_SC_PAGESIZE);
    BOOST_TEST((after - filled) * page < (std::int64_t{8} << 20), "grew by " << (after - filled) * page << " bytes");
    // The profile counted the calls (it may lose a few to races with other communicators' threads: none here).
    std::int64_t profiled = 0;
    for (const auto& n : snap["profile"]["calls"]) profiled += n.get<std::int64_t>();
    BOOST_TEST(profiled >= total);
}

BOOST_AUTO_TEST_CASE(a_reader_never_sees_a_torn_entry) {
    Communicator self = comm().split(R(), 0);
    Tensor small = Tensor::full({1}, 1.0, DType::Float32);
    Tensor large = Tensor::full({2, 3}, 1.0, DType::Float64);
    std::atomic<bool> done{false};
    std::atomic<int> snapshots{0};
    std::atomic<int> bad{0};
    std::string first_bad;
    const std::uint64_t id = [&] {
        self.barrier();
        return newest(detail::recorder_snapshot())["id"].get<std::uint64_t>();
    }();
    std::thread reader([&] {
        while (!done.load(std::memory_order_acquire) || snapshots.load() < 3) {
            const json snap = detail::recorder_snapshot();
            snapshots.fetch_add(1);
            for (const auto& c : calls_of(snap, id)) {
                // Odd call numbers are float32[1] allreduces, even ones float64[2,3] (the barrier was #1).
                const std::int64_t seq = c["seq"].get<std::int64_t>();
                if (seq == 1) continue;
                const bool odd = seq % 2 == 1;
                const bool whole =
                    c["op"] == "allreduce" && c["dtype"] == (odd ? "float32" : "float64") &&
                    c["count"].get<int>() == (odd ? 1 : 6) && c["shape"].size() == (odd ? 1u : 2u) &&
                    (c["completed_us"].is_null() || c["issued_us"].get<double>() <= c["completed_us"].get<double>());
                if (!whole && bad.fetch_add(1) == 0) first_bad = c.dump();
            }
        }
    });
    for (int i = 0; i < 200000 && snapshots.load() < 50; ++i) {
        self.allreduce_(i % 2 == 0 ? large : small);
    }
    done.store(true, std::memory_order_release);
    reader.join();
    BOOST_TEST(bad.load() == 0, first_bad);
    BOOST_TEST(snapshots.load() >= 3);
}

BOOST_AUTO_TEST_CASE(calls_another_library_carries_are_recorded) {
    Communicator c(comm().mpi_comm());
    const std::int64_t dims[] = {2, 5};
    const std::uint64_t first =
        c.begin_foreign({.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = dims, .reduce_op = ReduceOp::Sum});
    const std::uint64_t second = c.begin_foreign({.op = OpKind::Barrier});
    // The carrier may complete them on another thread, and out of order.
    std::thread([&] {
        c.end_foreign(second);
        c.end_foreign(first);
    }).join();
    const std::uint64_t pending = c.begin_foreign({.op = OpKind::Broadcast, .dtype = DType::Int64, .root = 0});
    const json snap = detail::recorder_snapshot();
    const std::vector<json> calls = calls_of(snap, newest(snap)["id"].get<std::uint64_t>());
    BOOST_REQUIRE_EQUAL(calls.size(), 3u);
    BOOST_TEST(calls[0]["op"] == "allreduce");
    BOOST_TEST(calls[0]["shape"] == json::array({2, 5}));
    BOOST_TEST(calls[0]["count"].get<int>() == 10);
    BOOST_TEST(calls[0]["nonblocking"] == true);
    BOOST_TEST(calls[0]["outcome"] == "ok");
    check_times(calls[0]);
    BOOST_TEST(calls[1]["op"] == "barrier");
    BOOST_TEST(calls[1]["outcome"] == "ok");
    BOOST_TEST(calls[2]["op"] == "broadcast");
    BOOST_TEST(calls[2]["outcome"] == "in_flight");
    BOOST_TEST(calls[2]["completed_us"].is_null());
    BOOST_TEST(same_everywhere(calls[2]["seq"].get<std::int64_t>()));
    c.end_foreign(pending);
}

BOOST_AUTO_TEST_CASE(mpi_calls_of_a_watched_program_are_recorded) {
    // What the check library does for a program's communicator: exchange endpoints, watch it, wrap its calls.
    namespace fw = lockstep::foreign;
    fw::start();
    const fw::EndpointBytes mine = fw::endpoint();
    std::vector<fw::EndpointBytes> all(static_cast<std::size_t>(N()));
    MPI_Allgather(mine.data(), sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm().mpi_comm());
    fw::Watched* watched = fw::watch(all, {.timeout = 0.0, .name = "MPI_COMM_WORLD"});
    static const int here = 0;
    const void* caller = &here;  // stands for a return address; the snapshot symbolises it
    fw::begin_collective(watched, {.name = "MPI_Allreduce", .count = 3, .datatype = "MPI_INT", .caller = caller});
    fw::end_collective(watched);
    fw::begin_point_to_point(watched, {.name = "MPI_Send",
                                       .direction = fw::Direction::send,
                                       .peer = 1,
                                       .tag = 9,
                                       .file = "train.py",
                                       .line = 40,
                                       .function = "step"});
    fw::end_point_to_point(watched);
    const json snap = detail::recorder_snapshot();
    const json& made = newest(snap, true);
    BOOST_TEST(made["name"] == "MPI_COMM_WORLD");
    BOOST_TEST(made["rank"].get<int>() == R());
    const std::vector<json> calls = calls_of(snap, made["id"].get<std::uint64_t>());
    fw::forget(watched);
    BOOST_REQUIRE_EQUAL(calls.size(), 2u);
    BOOST_TEST(calls[0]["op"] == "MPI_Allreduce");
    BOOST_TEST(calls[0]["kind"] == "collective");
    BOOST_TEST(calls[0]["dtype"] == "MPI_INT");
    BOOST_TEST(calls[0]["count"].get<int>() == 3);
    BOOST_TEST(calls[0]["seq"].get<int>() == 1);
    BOOST_TEST(!calls[0]["site"].get<std::string>().empty());
    BOOST_TEST(calls[0]["outcome"] == "ok");
    check_times(calls[0]);
    BOOST_TEST(calls[1]["op"] == "MPI_Send");
    BOOST_TEST(calls[1]["kind"] == "send");
    BOOST_TEST(calls[1]["peer"].get<int>() == 1);
    BOOST_TEST(calls[1]["tag"].get<int>() == 9);
    BOOST_TEST(calls[1]["site"] == "train.py:40 (step)");
    check_times(calls[1]);
}

// The snapshots of every rank, as they are taken, merge into a trace: one slice per call of each rank, the late rank of
// each collective marked (a rank that sleeps 200 ms before each barrier is last in every one, whatever the load).
BOOST_AUTO_TEST_CASE(real_snapshots_merge_into_a_trace) {
    Communicator c(comm().mpi_comm());
    for (int i = 0; i < 3; ++i) {
        if (R() == N() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        c.barrier();
    }
    const std::string mine = detail::recorder_snapshot().dump();
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(N()));
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm().mpi_comm());
    std::vector<int> offsets(lengths.size(), 0);
    for (std::size_t r = 1; r < lengths.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    std::string all(R() == 0 ? static_cast<std::size_t>(offsets.back() + lengths.back()) : 0, '\0');
    MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                comm().mpi_comm());
    if (R() != 0) return;
    std::vector<json> snapshots;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
        snapshots.push_back(
            json::parse(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r]))));
    }
    const std::uint64_t id = newest(snapshots[0])["id"].get<std::uint64_t>();
    const json merged = detail::merge_trace(snapshots, {.reason = "demand", .job = "test", .expected_ranks = N()});
    BOOST_TEST(merged["lockstep"]["missing_ranks"].empty());
    int barriers = 0, late = 0;
    for (const auto& e : merged["traceEvents"]) {
        if (e.value("ph", "") != "X" || e.value("name", "") != "barrier" || !e.contains("args")) continue;
        if (e["args"].value("comm", std::uint64_t{0}) != id) continue;
        ++barriers;
        if (e["args"].value("last_arriver", false)) {
            ++late;
            BOOST_TEST(e["pid"].get<int>() == N() - 1, e.dump());
        }
    }
    BOOST_TEST(barriers == 3 * N());
    BOOST_TEST(late == 3);
}
