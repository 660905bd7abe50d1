#include <lockstep/trigger.hpp>

#include <map>
#include <mutex>

namespace lockstep {

namespace {
// Set triggers, per communicator (a communicator lives at one address for its life; moves are not tracked, so the
// trigger belongs to the object the caller passes).
std::mutex trigger_mutex;
std::map<const Communicator*, bool>& triggers() {
    static std::map<const Communicator*, bool> set;
    return set;
}
}  // namespace

void set_trigger(const Communicator& comm) {
    std::scoped_lock lock(trigger_mutex);
    triggers()[&comm] = true;
}

bool check_trigger(Communicator& comm, CallSite site) {
    bool mine = false;
    {
        std::scoped_lock lock(trigger_mutex);
        auto it = triggers().find(&comm);
        if (it != triggers().end()) {
            mine = it->second;
            it->second = false;
        }
    }
    Tensor flag = Tensor::full({}, mine ? 1.0 : 0.0, DType::Bool);
    comm.allreduce_(flag, ReduceOp::Max, site);  // logical or
    return flag.item<bool>();
}

}  // namespace lockstep
