/* lockstep.h alone compiles as C99 with every warning an error, and its initialisers fill the option structs. */
#include "lockstep.h"

int main(void) {
    lockstep_init_options_t init = LOCKSTEP_INIT_OPTIONS_INIT;
    lockstep_comm_options_t comm = LOCKSTEP_COMM_OPTIONS_INIT;
    lockstep_call_options_t call = LOCKSTEP_CALL_OPTIONS_INIT;
    lockstep_batch_size_options_t batch = LOCKSTEP_BATCH_SIZE_OPTIONS_INIT;
    DLManagedTensorVersioned versioned;
    versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    return (int)(init.struct_size == sizeof init && comm.struct_size == sizeof comm &&
                 call.struct_size == sizeof call && batch.struct_size == sizeof batch && versioned.flags == 1 &&
                 LOCKSTEP_C_VERSION > 0)
               ? 0
               : 1;
}
