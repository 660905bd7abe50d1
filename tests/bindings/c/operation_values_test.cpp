// The operation table seen through the C interface: every row with a C value names the same operation through
// lockstep_collective_name, every C value maps back to its row, the values outside the enum name nothing, and the
// reduce ops round-trip the same way. (That every row has its line in the mapping is checked when it compiles.)
#define BOOST_TEST_MODULE operation_values
#include <boost/test/unit_test.hpp>

#include "operation_values.hpp"

#include <cstring>
#include <string>

using namespace lockstep;
using namespace lockstep::c_api;

BOOST_AUTO_TEST_CASE(every_row_round_trips_through_its_c_value) {
    int named = 0;
    for (std::size_t i = 0; i < operation_count; ++i) {
        const auto op = static_cast<OpKind>(i);
        const OperationInfo info = operation_info(op);
        BOOST_TEST_CONTEXT(info.name) {
            BOOST_TEST(info.name.starts_with("lockstep::"));
            BOOST_TEST((collective_values[i].op == op));
            const lockstep_collective_t value = collective_values[i].value;
            if (value == no_collective_value) {
                continue;
            }
            ++named;
            BOOST_TEST(!info.point_to_point);
            BOOST_TEST((operation_of(value) == op));
            const char* name = lockstep_collective_name(value);
            BOOST_REQUIRE(name != nullptr);
            BOOST_TEST("lockstep::" + std::string(name) == std::string(info.name));
        }
    }
    BOOST_TEST(named == collective_value_count);
}

BOOST_AUTO_TEST_CASE(values_outside_the_enum_name_nothing) {
    BOOST_TEST(lockstep_collective_name(-1) == nullptr);
    BOOST_TEST(lockstep_collective_name(collective_value_count) == nullptr);
    BOOST_TEST(lockstep_reduce_op_name(-1) == nullptr);
    BOOST_TEST(lockstep_reduce_op_name(static_cast<lockstep_reduce_op_t>(reduce_op_count)) == nullptr);
    // Counting up from 0 until NULL lists every collective, as a binding would.
    int count = 0;
    while (lockstep_collective_name(count) != nullptr) ++count;
    BOOST_TEST(count == collective_value_count);
}

BOOST_AUTO_TEST_CASE(the_frozen_values_name_their_operations) {
    BOOST_TEST(std::strcmp(lockstep_collective_name(LOCKSTEP_COLLECTIVE_BARRIER), "barrier") == 0);
    BOOST_TEST(std::strcmp(lockstep_collective_name(LOCKSTEP_COLLECTIVE_REDUCE_SCATTER), "reduce_scatter") == 0);
    BOOST_TEST(std::strcmp(lockstep_collective_name(LOCKSTEP_COLLECTIVE_GATHER_UNEVEN), "gather_uneven") == 0);
    BOOST_TEST(std::strcmp(lockstep_collective_name(LOCKSTEP_COLLECTIVE_ALLTOALLV), "alltoallv") == 0);
    // Reduce ops appended after the first five: their names, as the Python package spells them.
    BOOST_TEST(std::strcmp(lockstep_reduce_op_name(LOCKSTEP_MEAN), "mean") == 0);
    BOOST_TEST(std::strcmp(lockstep_reduce_op_name(LOCKSTEP_BAND), "band") == 0);
    BOOST_TEST(std::strcmp(lockstep_reduce_op_name(LOCKSTEP_BOR), "bor") == 0);
    BOOST_TEST(std::strcmp(lockstep_reduce_op_name(LOCKSTEP_BXOR), "bxor") == 0);
    BOOST_TEST(std::strcmp(lockstep_reduce_op_name(LOCKSTEP_PREMUL_SUM), "premul_sum") == 0);
    BOOST_TEST(std::strcmp(lockstep_dtype_name(LOCKSTEP_INT16), "int16") == 0);
    BOOST_TEST(std::strcmp(lockstep_dtype_name(LOCKSTEP_COMPLEX128), "complex128") == 0);
    BOOST_TEST(lockstep_dtype_size(LOCKSTEP_COMPLEX64) == 8u);
    BOOST_TEST(lockstep_dtype_size(LOCKSTEP_UINT64) == 8u);
    BOOST_TEST(lockstep_dtype_size(LOCKSTEP_COMPLEX128 + 1) == 0u);
    // The funnel refuses root -1 for exactly these (a send's or recv's peer is not a root), and the C interface
    // passes a reduce op for exactly these.
    for (std::size_t i = 0; i < operation_count; ++i) {
        const auto op = static_cast<OpKind>(i);
        BOOST_TEST_CONTEXT(op_name(op)) {
            BOOST_TEST(operation_info(op).rooted == (op == OpKind::Broadcast || op == OpKind::Reduce ||
                                                     op == OpKind::Gather || op == OpKind::Scatter));
            BOOST_TEST(operation_info(op).reduces ==
                       (op == OpKind::Reduce || op == OpKind::Allreduce || op == OpKind::ReduceScatter));
            BOOST_TEST(operation_info(op).point_to_point == (op == OpKind::Send || op == OpKind::Recv));
        }
    }
    BOOST_TEST(operation_info(static_cast<OpKind>(operation_count)).name == "lockstep::unknown");
}

BOOST_AUTO_TEST_CASE(reduce_ops_round_trip) {
    for (std::size_t i = 0; i < reduce_op_count; ++i) {
        const auto op = static_cast<ReduceOp>(i);
        const lockstep_reduce_op_t value = reduce_op_values[i].value;
        BOOST_TEST((reduce_op_of(value) == op));
        const char* name = lockstep_reduce_op_name(value);
        BOOST_REQUIRE(name != nullptr);
        BOOST_TEST(std::string(name) == std::string(reduce_op_name(op)));
    }
    BOOST_TEST(std::strcmp(lockstep_reduce_op_name(LOCKSTEP_MEAN), "mean") == 0);
}
