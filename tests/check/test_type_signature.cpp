// MPI type signatures in canonical form (check/type_signature.hpp): what matches under MPI's type-matching rule and
// what does not, without expanding counts. One process (mpirun -n 1).
#define BOOST_TEST_MODULE check_type_signature
#include <boost/test/unit_test.hpp>

#include "type_signature.hpp"

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace lc = lockstep::check;

namespace {

struct MpiFixture {
    MpiFixture() { PMPI_Init(nullptr, nullptr); }
    ~MpiFixture() { PMPI_Finalize(); }
};
BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

// Derived types made here and freed at the end of each test.
struct Types {
    std::vector<MPI_Datatype> made;
    MPI_Datatype keep(MPI_Datatype t) {
        PMPI_Type_commit(&t);
        made.push_back(t);
        return t;
    }
    MPI_Datatype contiguous(int n, MPI_Datatype old) {
        MPI_Datatype t;
        PMPI_Type_contiguous(n, old, &t);
        return keep(t);
    }
    MPI_Datatype structure(std::vector<int> lengths, std::vector<MPI_Datatype> types) {
        std::vector<MPI_Aint> displacements(lengths.size());
        MPI_Aint at = 0;
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            displacements[i] = at;
            int size = 0;
            PMPI_Type_size(types[i], &size);
            at += static_cast<MPI_Aint>(size) * lengths[i] + 8;  // gaps: displacements do not count
        }
        MPI_Datatype t;
        PMPI_Type_create_struct(static_cast<int>(lengths.size()), lengths.data(), displacements.data(), types.data(),
                                &t);
        return keep(t);
    }
    ~Types() {
        for (auto& t : made) {
            lc::forget_type_signature(t);
            PMPI_Type_free(&t);
        }
    }
};

bool match(long long a_count, MPI_Datatype a, long long b_count, MPI_Datatype b) {
    return lc::signatures_match(lc::side_signature(a_count, a), lc::side_signature(b_count, b));
}

}  // namespace

BOOST_AUTO_TEST_CASE(contiguous_matches_its_basic_elements) {
    Types t;
    const MPI_Datatype four = t.contiguous(4, MPI_INT);
    const MPI_Datatype two = t.contiguous(2, MPI_INT);
    BOOST_TEST(match(4, MPI_INT, 1, four));
    BOOST_TEST(match(2, two, 1, four));
    BOOST_TEST(match(8, MPI_INT, 2, four));
    BOOST_TEST(!match(3, MPI_INT, 1, four));
    BOOST_TEST(!match(4, MPI_FLOAT, 1, four));
    BOOST_TEST(!match(4, MPI_INT, 4, MPI_FLOAT));
    BOOST_TEST(!match(4, MPI_INT, 4, MPI_UNSIGNED));
}

BOOST_AUTO_TEST_CASE(displacements_do_not_count) {
    Types t;
    MPI_Datatype columns;
    PMPI_Type_vector(2, 2, 5, MPI_DOUBLE, &columns);
    columns = t.keep(columns);
    BOOST_TEST(match(4, MPI_DOUBLE, 1, columns));
    MPI_Datatype resized;
    PMPI_Type_create_resized(columns, 0, 1000, &resized);
    resized = t.keep(resized);
    BOOST_TEST(match(8, MPI_DOUBLE, 2, resized));
    int lengths[2] = {1, 3};
    int displacements[2] = {7, 0};
    MPI_Datatype indexed;
    PMPI_Type_indexed(2, lengths, displacements, MPI_INT, &indexed);
    indexed = t.keep(indexed);
    BOOST_TEST(match(4, MPI_INT, 1, indexed));
    int sizes[2] = {10, 10};
    int subsizes[2] = {3, 2};
    int starts[2] = {1, 1};
    MPI_Datatype sub;
    PMPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_FLOAT, &sub);
    sub = t.keep(sub);
    BOOST_TEST(match(6, MPI_FLOAT, 1, sub));
    MPI_Datatype dup;
    PMPI_Type_dup(MPI_INT, &dup);
    dup = t.keep(dup);
    BOOST_TEST(match(3, MPI_INT, 3, dup));
}

BOOST_AUTO_TEST_CASE(structs_compare_as_their_sequence) {
    Types t;
    const MPI_Datatype pair = t.structure({1, 2}, {MPI_INT, MPI_DOUBLE});
    const MPI_Datatype two_pairs = t.structure({1, 2, 1, 2}, {MPI_INT, MPI_DOUBLE, MPI_INT, MPI_DOUBLE});
    BOOST_TEST(match(2, pair, 1, two_pairs));
    BOOST_TEST(match(6, pair, 3, two_pairs));
    BOOST_TEST(!match(3, pair, 1, two_pairs));
    // First and last runs of one type: copies merge at the seams, so the roots must be compared on the whole sequence.
    const MPI_Datatype ifi = t.structure({1, 1, 1}, {MPI_INT, MPI_FLOAT, MPI_INT});
    const MPI_Datatype ifiifi = t.structure({1, 1, 2, 1, 1}, {MPI_INT, MPI_FLOAT, MPI_INT, MPI_FLOAT, MPI_INT});
    BOOST_TEST(match(2, ifi, 1, ifiifi));
    BOOST_TEST(!match(1, ifi, 1, ifiifi));
    const MPI_Datatype contiguous_ifi = t.contiguous(2, ifi);
    BOOST_TEST(match(1, contiguous_ifi, 1, ifiifi));
    // A struct of one type is that type.
    const MPI_Datatype ints = t.structure({2, 3}, {MPI_INT, MPI_INT});
    BOOST_TEST(match(5, MPI_INT, 1, ints));
    BOOST_TEST(!match(2, ints, 1, pair));
}

// 2^31 pairs: expanded, this would not fit in memory (the test's timeout would end it first).
BOOST_AUTO_TEST_CASE(huge_counts_are_not_expanded) {
    Types t;
    const MPI_Datatype pair = t.structure({1, 1}, {MPI_INT, MPI_DOUBLE});
    const MPI_Datatype big = t.contiguous(1 << 20, pair);
    const MPI_Datatype bigger = t.contiguous(1 << 10, big);
    BOOST_TEST(match(1LL << 30, pair, 1, bigger));
    BOOST_TEST(match(1 << 10, big, 1, bigger));
    BOOST_TEST(!match((1LL << 30) - 1, pair, 1, bigger));
}

BOOST_AUTO_TEST_CASE(bytes_and_packed_compare_by_size) {
    BOOST_TEST(match(16, MPI_BYTE, 4, MPI_INT));
    BOOST_TEST(!match(12, MPI_BYTE, 4, MPI_INT));
    BOOST_TEST(match(8, MPI_PACKED, 2, MPI_FLOAT));
    BOOST_TEST(match(16, MPI_BYTE, 16, MPI_BYTE));
}

BOOST_AUTO_TEST_CASE(the_same_c_type_under_two_names_matches) {
    BOOST_TEST(match(3, MPI_LONG, 3, MPI_INT64_T));
    BOOST_TEST(match(3, MPI_LONG_LONG, 3, MPI_INT64_T));
    BOOST_TEST(match(2, MPI_DOUBLE, 2, MPI_DOUBLE_PRECISION));
    BOOST_TEST(!match(2, MPI_DOUBLE, 2, MPI_FLOAT));
    BOOST_TEST(!match(2, MPI_2INT, 2, MPI_FLOAT_INT));
}

BOOST_AUTO_TEST_CASE(empty_signatures_match) {
    BOOST_TEST(match(0, MPI_INT, 0, MPI_DOUBLE));
    BOOST_TEST(!match(0, MPI_INT, 1, MPI_INT));
}

BOOST_AUTO_TEST_CASE(describes_the_sequence) {
    Types t;
    const MPI_Datatype four = t.contiguous(4, MPI_INT);
    BOOST_TEST(lc::describe(lc::side_signature(4, MPI_INT)) == "4 x MPI_INT");
    BOOST_TEST(lc::describe(lc::side_signature(2, four)) == "2 x MPI_Type_contiguous (= 8 x MPI_INT)");
    const MPI_Datatype pair = t.structure({1, 2}, {MPI_INT, MPI_DOUBLE});
    BOOST_TEST(lc::describe(lc::side_signature(3, pair)) ==
               "3 x MPI_Type_create_struct (= 3 x {MPI_INT, MPI_DOUBLE x2})");
}
