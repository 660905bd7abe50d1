// Run under mpirun with 2, 3 and 4 ranks: the non-blocking operations. Every collective's non-blocking form against
// its blocking form; receives posted before sends in every order, eager and rendezvous; a thousand requests waited
// in reverse and random order; blocking calls between non-blocking ones; the debug-mode exchange that must not block
// at issue; every mismatch kind at wait, the same text on every rank; requests never waited for, named when their
// communicator is freed. Each case runs with the progress thread and without it (inside wait/test).
#define BOOST_TEST_MODULE nonblocking_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "logging_capture.hpp"
#include "runtime_fixture.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

using namespace lockstep;
using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

namespace {

std::vector<double> values(const Tensor& t) {
    return ops::cast(t.to(Device::cpu()), DType::Float64).to_vector<double>();
}

// The world's duplicate with the progress thread on or off, and debug mode as asked.
Communicator make(bool thread, bool debug = false) {
    return Communicator(comm().mpi_comm(), {.debug = debug, .progress_thread = thread});
}

// Runs `body` on a communicator with the progress thread, then on one without.
void both_modes(const std::function<void(Communicator&)>& body, bool debug = false) {
    for (bool thread : {true, false}) {
        BOOST_TEST_CONTEXT("progress thread " << (thread ? "on" : "off")) {
            Communicator c = make(thread, debug);
            BOOST_TEST(c.progress_thread() == thread);
            body(c);
            BOOST_TEST(c.outstanding() == 0u);
        }
    }
}

// Every rank's text, gathered: true when they are all equal.
bool same_on_every_rank(const std::string& text) {
    const std::uint64_t h = std::hash<std::string>{}(text);
    Tensor mine = Tensor::full({1}, 0.0, DType::Int64);
    static_cast<std::int64_t*>(mine.data())[0] = static_cast<std::int64_t>(h);
    const Tensor all = comm().allgather(mine);
    const auto* p = static_cast<const std::int64_t*>(all.data());
    return std::all_of(p, p + N(), [&](std::int64_t x) { return x == p[0]; });
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_collective_matches_its_blocking_form) {
    both_modes([](Communicator& c) {
        const double n = N();
        Tensor t = Tensor::full({2 * N(), 3}, R() + 1, DType::Float32);
        // Issued together, waited in reverse order.
        std::vector<Work> works;
        works.push_back(c.iallreduce(t));
        Tensor in_place = t.clone();
        works.push_back(c.iallreduce_(in_place, ReduceOp::Max));
        works.push_back(c.ibroadcast(t, N() - 1));
        Tensor bcast = t.clone();
        works.push_back(c.ibroadcast_(bcast, 0));
        works.push_back(c.ireduce(t, ReduceOp::Sum, 0));
        works.push_back(c.igather(t, 0));
        works.push_back(c.iallgather(t));
        Tensor gathered = Tensor::empty({2 * N() * N(), 3});
        works.push_back(c.iallgather_into(t, gathered));
        works.push_back(c.iscatter(t, 0));
        works.push_back(c.ireduce_scatter(t));
        Tensor scattered = Tensor::empty({2, 3});
        works.push_back(c.ireduce_scatter_into(t, scattered));
        works.push_back(c.ialltoall(t));
        Tensor uneven = Tensor::full({R() + 1}, R(), DType::Int32);
        works.push_back(c.igather_uneven(uneven));
        works.push_back(c.ibarrier());
        for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();

        const auto equal = [](const Tensor& a, const Tensor& b) { return values(a) == values(b); };
        BOOST_TEST(equal(works[0].result(), c.allreduce(t)));
        BOOST_TEST(equal(in_place, Tensor::full({2 * N(), 3}, n)));
        BOOST_TEST(equal(works[1].result(), in_place));
        BOOST_TEST(equal(works[2].result(), c.broadcast(t, N() - 1)));
        BOOST_TEST(equal(bcast, Tensor::full({2 * N(), 3}, 1.0)));
        const Tensor reduced = c.reduce(t, ReduceOp::Sum, 0);
        BOOST_TEST(works[4].result().defined() == (R() == 0));
        if (R() == 0) BOOST_TEST(equal(works[4].result(), reduced));
        const Tensor gathered_blocking = c.gather(t, 0);
        if (R() == 0) BOOST_TEST(equal(works[5].result(), gathered_blocking));
        BOOST_TEST(equal(works[6].result(), c.allgather(t)));
        BOOST_TEST(equal(gathered, works[6].result()));
        BOOST_TEST(equal(works[8].result(), c.scatter(t, 0)));
        BOOST_TEST(equal(works[9].result(), c.reduce_scatter(t)));
        BOOST_TEST(equal(scattered, works[9].result()));
        BOOST_TEST(equal(works[10].result(), scattered));
        BOOST_TEST(equal(works[11].result(), c.alltoall(t)));
        BOOST_TEST(equal(works[12].result(), c.gather_uneven(uneven)));
        BOOST_TEST(!works[13].result().defined());
        for (const Work& w : works) BOOST_TEST(w.is_completed());
    });
}

BOOST_AUTO_TEST_CASE(receives_posted_before_sends_in_every_order_and_size) {
    // A ring: every rank receives from its left neighbour and sends to its right one. Orders: receive first, send
    // first, and mixed (even ranks receive first); sizes: eager (4 bytes, 4 KiB) and rendezvous (4 MiB).
    both_modes([](Communicator& c) {
        const int right = (R() + 1) % N();
        const int left = (R() + N() - 1) % N();
        for (const std::int64_t elements : {std::int64_t{1}, std::int64_t{1024}, std::int64_t{1} << 20}) {
            for (int order = 0; order < 3; ++order) {
                BOOST_TEST_CONTEXT(elements << " elements, order " << order) {
                    Tensor out = Tensor::full({elements}, R() * 10.0 + order);
                    Tensor in = Tensor::zeros({elements});
                    const bool receive_first = order == 0 || (order == 2 && R() % 2 == 0);
                    Work r, s;
                    if (receive_first) {
                        r = c.irecv(in, left, order);
                        s = c.isend(out, right, order);
                    } else {
                        s = c.isend(out, right, order);
                        r = c.irecv(in, left, order);
                    }
                    r.wait();
                    s.wait();
                    const auto got = values(in);
                    BOOST_TEST(got.front() == left * 10.0 + order);
                    BOOST_TEST(got.back() == left * 10.0 + order);
                    BOOST_TEST(r.source() == left);
                    BOOST_TEST(r.result().data() == in.data());
                }
            }
        }
        // Any source: rank 0 receives one message from every other rank, in whatever order they come.
        if (R() == 0) {
            std::vector<Tensor> bufs;
            std::vector<Work> works;
            for (int i = 1; i < N(); ++i) {
                bufs.push_back(Tensor::zeros({4}));
                works.push_back(c.irecv_any(bufs.back(), 7));
            }
            std::vector<int> sources;
            for (std::size_t i = 0; i < works.size(); ++i) {
                const int from = works[i].source();
                sources.push_back(from);
                BOOST_TEST(values(bufs[i]).front() == from);
            }
            std::sort(sources.begin(), sources.end());
            std::vector<int> expected(static_cast<std::size_t>(N() - 1));
            std::iota(expected.begin(), expected.end(), 1);
            BOOST_TEST(sources == expected);
        } else {
            c.isend(Tensor::full({4}, R()), 0, 7).wait();
        }
    });
}

BOOST_AUTO_TEST_CASE(a_thousand_requests_waited_in_reverse_and_random_order) {
    both_modes([](Communicator& c) {
        const int count = 1000;
        for (const bool reverse : {true, false}) {
            std::vector<Tensor> tensors;
            std::vector<Work> works;
            for (int i = 0; i < count; ++i) {
                tensors.push_back(Tensor::full({4}, i + R()));
                works.push_back(c.iallreduce_(tensors.back()));
            }
            std::vector<int> order(count);
            std::iota(order.begin(), order.end(), 0);
            if (reverse) {
                std::reverse(order.begin(), order.end());
            } else {
                std::mt19937 rng(static_cast<unsigned>(R() * 7919 + 1));  // a different order on every rank
                std::shuffle(order.begin(), order.end(), rng);
            }
            for (const int i : order) works[static_cast<std::size_t>(i)].wait();
            const double n = N();
            bool right = true;
            for (int i = 0; i < count; ++i) {
                right = right && values(tensors[static_cast<std::size_t>(i)]).front() == n * i + n * (n - 1) / 2;
            }
            BOOST_TEST(right);
        }
    });
}

BOOST_AUTO_TEST_CASE(blocking_and_non_blocking_calls_interleave) {
    both_modes([](Communicator& c) {
        Tensor a = Tensor::full({8}, 1.0);
        Tensor b = Tensor::full({8}, 2.0);
        Work wa = c.iallreduce_(a);
        const Tensor blocking = c.allreduce(Tensor::full({8}, 3.0));  // runs after wa on every rank
        BOOST_TEST(wa.is_completed());
        Work wb = c.iallreduce_(b);
        c.barrier();
        Work wc = c.ibroadcast(Tensor::full({2}, R()), 0);
        const Communicator sub = c.dup();  // waits for the queue too
        BOOST_TEST(wb.is_completed());
        BOOST_TEST(values(wc.result()).front() == 0.0);
        wb.wait();
        wa.wait();
        BOOST_TEST(values(a).front() == N());
        BOOST_TEST(values(b).front() == 2.0 * N());
        BOOST_TEST(values(blocking).front() == 3.0 * N());
    });
}

BOOST_AUTO_TEST_CASE(debug_mode_does_not_block_at_issue) {
    // Rank 0: iallreduce, then a receive of a rendezvous-size message; rank 1: the send, then the iallreduce. A
    // blocking signature exchange at issue would leave rank 0 in it while rank 1 waits in its send.
    both_modes(
        [](Communicator& c) {
            Tensor x = Tensor::full({16}, 1.0);
            Tensor big = Tensor::zeros({std::int64_t{1} << 20});
            if (R() == 0) {
                Work w = c.iallreduce_(x);
                c.recv(big, 1);
                w.wait();
                BOOST_TEST(values(big).front() == 5.0);
            } else if (R() == 1) {
                c.send(Tensor::full({std::int64_t{1} << 20}, 5.0), 0);
                c.iallreduce_(x).wait();
            } else {
                c.iallreduce_(x).wait();
            }
            BOOST_TEST(values(x).front() == N());
            BOOST_TEST(c.stats().signature_checks > 0u);
        },
        /*debug=*/true);
}

BOOST_AUTO_TEST_CASE(every_mismatch_kind_raises_the_same_error_at_wait) {
    struct Case {
        const char* name;
        std::function<Work(Communicator&)> issue;
        const char* expected;  // a word of the report
    };
    const std::vector<Case> cases = {
        {"shape", [](Communicator& c) { return c.iallreduce(Tensor::ones({R() == 0 ? 3 : 4})); }, "hape"},
        {"dtype",
         [](Communicator& c) { return c.iallreduce(Tensor::ones({4}, R() == 0 ? DType::Float64 : DType::Float32)); },
         "type"},
        {"reduce op",
         [](Communicator& c) { return c.iallreduce(Tensor::ones({4}), R() == 0 ? ReduceOp::Max : ReduceOp::Sum); },
         "max"},
        {"root", [](Communicator& c) { return c.ibroadcast(Tensor::ones({4}), R() == 0 ? 1 : 0); }, "oot"},
        {"op",
         [](Communicator& c) { return R() == 0 ? c.iallgather(Tensor::ones({4})) : c.iallreduce(Tensor::ones({4})); },
         "allgather"},
    };
    both_modes(
        [&](Communicator& c) {
            for (const Case& k : cases) {
                BOOST_TEST_CONTEXT(k.name) {
                    Work w = k.issue(c);
                    std::string text;
                    try {
                        w.wait();
                    } catch (const SignatureMismatchError& e) {
                        text = e.what();
                    }
                    BOOST_TEST(text.find(k.expected) != std::string::npos, text);
                    BOOST_TEST(same_on_every_rank(text));
                    // The error is the operation's: every later wait and test throws it again.
                    BOOST_CHECK_THROW(w.wait(), SignatureMismatchError);
                    BOOST_CHECK_THROW(w.test(), SignatureMismatchError);
                }
            }
            // Issue order: rank 0 issues allreduce then broadcast, the others broadcast then allreduce. Both calls
            // fail, at their waits, the same way everywhere; the communicator goes on.
            Tensor a = Tensor::ones({4});
            Work first = R() == 0 ? c.iallreduce(a) : c.ibroadcast(a, 0);
            Work second = R() == 0 ? c.ibroadcast(a, 0) : c.iallreduce(a);
            std::string t1, t2;
            try {
                second.wait();
            } catch (const SignatureMismatchError& e) {
                t2 = e.what();
            }
            try {
                first.wait();
            } catch (const SignatureMismatchError& e) {
                t1 = e.what();
            }
            BOOST_TEST(!t1.empty());
            BOOST_TEST(!t2.empty());
            BOOST_TEST(same_on_every_rank(t1 + t2));
            BOOST_TEST(values(c.allreduce(a)).front() == N());
        },
        /*debug=*/true);
}

BOOST_AUTO_TEST_CASE(a_local_error_surfaces_at_wait) {
    // The mean of an integer tensor: wrong on every rank, raised by every rank at its wait, not at issue.
    both_modes([](Communicator& c) {
        Work w = c.iallreduce(Tensor::ones({4}, DType::Int32), ReduceOp::Mean);
        BOOST_CHECK_THROW(w.wait(), DTypeError);
        BOOST_TEST(w.is_completed());
        BOOST_TEST(values(c.allreduce(Tensor::ones({2}))).front() == N());
    });
}

BOOST_AUTO_TEST_CASE(test_wait_for_and_threads) {
    both_modes([](Communicator& c) {
        Tensor x = Tensor::full({1024}, 1.0);
        Work w = c.iallreduce_(x);
        while (!w.test()) std::this_thread::yield();
        BOOST_TEST(values(x).front() == N());
        // A receive that nothing matches yet: wait_for(0) and a short wait_for say not completed.
        Tensor in = Tensor::zeros({4});
        const int right = (R() + 1) % N();
        const int left = (R() + N() - 1) % N();
        Work r = c.irecv(in, left, 3);
        BOOST_TEST(!r.wait_for(std::chrono::seconds(0)));
        BOOST_TEST(!r.test());
        BOOST_TEST(!r.is_completed());
        BOOST_CHECK_THROW((void)r.wait_for(std::chrono::duration<double>(-1.0)), InvalidArgumentError);
        c.barrier();
        // Another thread waits for it.
        Work copy = r;
        std::thread waiter([copy]() mutable { copy.wait(); });
        c.isend(Tensor::full({4}, 9.0), right, 3).wait();
        waiter.join();
        BOOST_TEST(r.wait_for(std::chrono::seconds(60)));
        BOOST_TEST(values(in).front() == 9.0);
        BOOST_TEST(r.describe().find("completed") != std::string::npos, r.describe());
        BOOST_TEST(r.id() > 0u);
        BOOST_TEST((r.op() == OpKind::Recv));
    });
}

BOOST_AUTO_TEST_CASE(bad_arguments_and_empty_handles) {
    Work empty;
    BOOST_TEST(!empty.valid());
    BOOST_CHECK_THROW(empty.wait(), InvalidArgumentError);
    BOOST_CHECK_THROW((void)empty.test(), InvalidArgumentError);
    BOOST_TEST(!empty.is_completed());
    BOOST_CHECK_THROW((void)comm().isend(Tensor::ones({1}), N(), 0), InvalidArgumentError);
    Tensor out = Tensor::ones({1});
    BOOST_CHECK_THROW((void)comm().irecv(out, -5, 0), InvalidArgumentError);
    BOOST_CHECK_THROW((void)comm().irecv(out, 0, -3), InvalidArgumentError);
    Work moved = comm().ibarrier();
    Work target = std::move(moved);
    BOOST_TEST(!moved.valid());
    target.wait();
}

BOOST_AUTO_TEST_CASE(requests_never_waited_for_are_named_when_the_communicator_is_freed) {
    for (bool thread : {true, false}) {
        lockstep_test::CapturedBlocks captured(log_route::console);
        {
            Communicator c = make(thread);
            (void)c.iallreduce(Tensor::ones({4}));  // dropped at once
            Work kept = c.ibroadcast(Tensor::ones({2}), 0);
            Tensor in = Tensor::zeros({1});
            Work never = c.irecv(in, (R() + 1) % N(), 99);  // nothing sends it
        }                                                   // the queue runs what it holds; the receive is cancelled
        std::string all;
        for (const auto& r : captured.records()) all += r.message + "\n";
        BOOST_TEST_CONTEXT(all) {
            BOOST_TEST(all.find("never waited for") != std::string::npos);
            BOOST_TEST(all.find("lockstep::allreduce") != std::string::npos);
            BOOST_TEST(all.find("dropped without a wait") != std::string::npos);
            BOOST_TEST(all.find("lockstep::broadcast") != std::string::npos);
            BOOST_TEST(all.find("lockstep::recv") != std::string::npos);
            BOOST_TEST(all.find("cancelled") != std::string::npos);
            BOOST_TEST(all.find("test_nonblocking_mpi.cpp") != std::string::npos);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_message_of_another_dtype_is_a_clear_error_at_wait) {
    // 3 float32 (12 bytes) into a receive of 2 float64: not a whole number of elements.
    const int right = (R() + 1) % N();
    const int left = (R() + N() - 1) % N();
    Tensor in = Tensor::zeros({2}, DType::Float64);
    Work r = comm().irecv(in, left, 21);
    comm().isend(Tensor::ones({3}), right, 21).wait();
    try {
        r.wait();
        BOOST_FAIL("no ShapeError");
    } catch (const ShapeError& e) {
        BOOST_TEST(std::string(e.what()).find("12 bytes, not a whole number of float64 elements") != std::string::npos,
                   e.what());
    }
}
