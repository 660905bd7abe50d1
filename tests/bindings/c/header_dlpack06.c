/* After Debian's DLPack 0.6 header, lockstep.h adds the versioned structure of DLPack 1.0, and the legacy structures
 * are the 0.6 ones: the layout both versions share. */
#include <dlpack/dlpack.h>

#include "lockstep.h"

#include <stddef.h>
#include <stdio.h>

#if DLPACK_VERSION != 60
#error "expected Debian's dlpack.h 0.6"
#endif

int main(void) {
    int ok = 1;
    DLManagedTensorVersioned v;
    /* The 1.0 versioned layout: version, manager_ctx, deleter, flags, then the DLTensor. */
    ok = ok && offsetof(DLManagedTensorVersioned, version) == 0;
    ok = ok && offsetof(DLManagedTensorVersioned, manager_ctx) == 8;
    ok = ok && offsetof(DLManagedTensorVersioned, deleter) == 16;
    ok = ok && offsetof(DLManagedTensorVersioned, flags) == 24;
    ok = ok && offsetof(DLManagedTensorVersioned, dl_tensor) == 32;
    /* The legacy layout of 0.6, which lockstep's export writes. */
    ok = ok && offsetof(DLManagedTensor, dl_tensor) == 0 && offsetof(DLManagedTensor, manager_ctx) == sizeof(DLTensor);
    ok = ok && offsetof(DLTensor, data) == 0 && offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 &&
         offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32 &&
         offsetof(DLTensor, byte_offset) == 40;
    ok = ok && sizeof(DLDataType) == 4 && kDLCPU == 1 && kDLCUDA == 2 && kDLCUDAHost == 3 && kDLBfloat == 4;
    v.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
    ok = ok && v.flags == 3 && LOCKSTEP_DLPACK_BOOL == 6;
    printf("DLPack 0.6 + lockstep.h layout: %s\n", ok ? "ok" : "MISMATCH");
    return ok ? 0 : 1;
}
