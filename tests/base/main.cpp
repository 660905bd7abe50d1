// The unit tests of lockstep_base, the layer every other one shares; one executable that links nothing else.
#define BOOST_TEST_MODULE base
#include <boost/test/unit_test.hpp>
