#include <lockstep/base/rank_groups.hpp>
#include <lockstep/signature.hpp>

namespace lockstep {

std::string format_rank_ranges(const std::vector<int>& ranks) {
    return base::format_rank_ranges(ranks);
}

}  // namespace lockstep
