/* lockstep.h: the stable C interface of lockstep (liblockstep_c.so.1, pkg-config module lockstep-c).
 *
 * C99 and C++11 or later; needs only <stddef.h> and <stdint.h>. Entry points that take an MPI_Comm are in
 * lockstep_mpi.h, so that glue code for a framework never needs mpi.h.
 *
 * Rules that hold for every function below:
 *  - Every function returns a lockstep_status_t (LOCKSTEP_OK is 0) unless its comment says otherwise. No C++
 *    exception crosses this interface. On failure, lockstep_last_error() gives the full text of the error in the
 *    calling thread, and lockstep_comm_last_error() the last error of a communicator; a collective that fails on
 *    every rank (a signature mismatch in debug mode, a call one rank could not start) gives the same text on every
 *    rank.
 *  - Handles are opaque. Every handle a function returns must be given back: lockstep_comm_free for communicators,
 *    lockstep_tensor_release for tensors, lockstep_request_free for requests. Every function checks its handles
 *    against the ones the library handed out and has not taken back: a freed or released handle, or a pointer no
 *    function returned, is LOCKSTEP_ERROR_INVALID_ARGUMENT naming the function and the argument, never a crash (a
 *    handle whose address the library has since given to a new handle cannot be told apart from that one).
 *  - Option structs begin with their own size. Initialise them with their LOCKSTEP_..._INIT macro, then set the fields
 *    you need: a program built against an older header passes a smaller struct, and the library reads only the fields
 *    that struct has. A NULL options pointer means all defaults. Flag bits this library does not know are an error
 *    (LOCKSTEP_ERROR_INVALID_ARGUMENT), never ignored. A struct_size above 4096 is LOCKSTEP_ERROR_INVALID_ARGUMENT
 *    (read no further than the size field).
 *  - Status codes are frozen: a code keeps its number forever and new codes are only appended.
 *
 * DLPack: this header carries the DLPack 1.0 type definitions (DLTensor, DLManagedTensor, DLManagedTensorVersioned)
 * unless a dlpack.h was included first; after a pre-1.0 dlpack.h (such as version 0.6) it adds the versioned parts.
 */
#ifndef LOCKSTEP_H
#define LOCKSTEP_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------------ versions */
#define LOCKSTEP_C_VERSION_MAJOR 1
#define LOCKSTEP_C_VERSION_MINOR 2
#define LOCKSTEP_C_VERSION_PATCH 0
#define LOCKSTEP_C_VERSION_ENCODE(major, minor, patch) ((int32_t)((major)*10000 + (minor)*100 + (patch)))
#define LOCKSTEP_C_VERSION \
    LOCKSTEP_C_VERSION_ENCODE(LOCKSTEP_C_VERSION_MAJOR, LOCKSTEP_C_VERSION_MINOR, LOCKSTEP_C_VERSION_PATCH)

#if defined(__GNUC__) || defined(__clang__)
#define LOCKSTEP_C_API __attribute__((visibility("default")))
#else
#define LOCKSTEP_C_API
#endif

/* ------------------------------------------------------------------------------------------------ DLPack */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#define DLPACK_DLL
#ifdef __cplusplus
extern "C" {
#endif
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16
} DLDeviceType;
typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;
typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U
} DLDataTypeCode;
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void* data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */

/* The versioned structure of DLPack 1.0, unless the dlpack.h included first has it (a 0.6 one does not). */
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#ifdef __cplusplus
extern "C" {
#endif
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned* self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#ifdef __cplusplus
}
#endif
#endif
/* The boolean type code of DLPack 1.0, for code that compiles against an older dlpack.h. */
#define LOCKSTEP_DLPACK_BOOL 6

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------ status */
typedef int32_t lockstep_status_t;
/* One code per error type of the C++ library. Frozen: numbers never change, new codes are appended. */
enum {
    LOCKSTEP_OK = 0,
    LOCKSTEP_ERROR_SIGNATURE_MISMATCH = 1, /* a collective whose calls differ between ranks (debug mode) */
    LOCKSTEP_ERROR_SHAPE = 2,              /* wrong shape for the operation */
    LOCKSTEP_ERROR_DTYPE = 3,              /* wrong or unsupported element type */
    LOCKSTEP_ERROR_DEVICE = 4,             /* a device that cannot be used */
    LOCKSTEP_ERROR_OUT_OF_MEMORY = 5,      /* an allocator ran out of memory (host or CUDA) */
    LOCKSTEP_ERROR_MPI = 6,                /* an MPI call returned an error code */
    LOCKSTEP_ERROR_CUDA = 7,               /* a CUDA or cuBLAS call returned an error code */
    LOCKSTEP_ERROR_TIMEOUT = 8,            /* a collective outlived its time limit (the watchdog's verdict) */
    LOCKSTEP_ERROR_READ_ONLY = 9,          /* a write into a read-only tensor */
    LOCKSTEP_ERROR_UNSUPPORTED = 10,       /* an operation, dtype, device or layout this build does not support */
    LOCKSTEP_ERROR_VERSION = 11,           /* the header and the library do not fit, or an options struct is newer */
    LOCKSTEP_ERROR_INVALID_ARGUMENT = 12,  /* an argument outside its domain: NULL handle, bad rank, unknown flag */
    LOCKSTEP_ERROR_INVALID_USAGE = 13,     /* a call at the wrong time: before lockstep_init, after finalize */
    LOCKSTEP_ERROR_INTERNAL = 14,          /* a failure lockstep did not expect: please report it */
    LOCKSTEP_ERROR_CALL_REJECTED = 15,     /* a collective some rank could not start (debug mode: on every rank) */
    LOCKSTEP_ERROR_DISTRIBUTED = 16,       /* another disagreement between ranks */
    LOCKSTEP_ERROR_CONFIG = 17,            /* a setting that cannot be used */
    LOCKSTEP_ERROR_RUNTIME = 18,           /* an error of the library without a more specific code */
    LOCKSTEP_ERROR_CALLBACK = 19           /* a callback of the caller (batch-size search) reported a failure */
};

/* "LOCKSTEP_ERROR_TIMEOUT": the name of a code; "LOCKSTEP_ERROR_UNKNOWN" for a number no version defines. */
LOCKSTEP_C_API const char* lockstep_status_string(lockstep_status_t status);
/* The full text of the last error in this thread ("" when none); valid until this thread's next failing call. */
LOCKSTEP_C_API const char* lockstep_last_error(void);
/* The code of that error (LOCKSTEP_OK when none). */
LOCKSTEP_C_API lockstep_status_t lockstep_last_error_status(void);
/* 1 when that error is a rejected call where some rank ran out of memory (or an out-of-memory error), else 0. */
LOCKSTEP_C_API int32_t lockstep_last_error_is_out_of_memory(void);
LOCKSTEP_C_API void lockstep_clear_last_error(void);

/* ------------------------------------------------------------------------------------------------ versions */
/* The library's LOCKSTEP_C_VERSION; the other pointers, when not NULL, receive its parts. Never fails. */
LOCKSTEP_C_API int32_t lockstep_get_version(int32_t* major, int32_t* minor, int32_t* patch);
/* "1.0.0 (commit abc123, CUDA yes)": static text. */
LOCKSTEP_C_API const char* lockstep_get_build_info(void);

/* ------------------------------------------------------------------------------------------------ handles */
typedef struct lockstep_runtime_s* lockstep_runtime_t;
typedef struct lockstep_comm_s* lockstep_comm_t;
typedef struct lockstep_tensor_s* lockstep_tensor_t;

/* ------------------------------------------------------------------------------------------------ runtime */
typedef struct lockstep_init_options {
    size_t struct_size; /* sizeof(lockstep_init_options_t) as the caller compiled it */
    uint64_t flags;     /* none defined yet: 0 */
    int32_t debug;      /* debug mode of new communicators: -1 from the configuration, 0 off, 1 on */
    int32_t reserved;   /* 0 (not read): the structs have no padding, so every later field has a place of its own */
    double timeout;     /* seconds before the watchdog reports a collective; < 0 from the configuration, 0 off */
    const char* config_file; /* NULL: the usual lookup; "": read no file */
    /* What a call that outlives its timeout does, for every communicator that does not choose (the configuration's
     * on_timeout): -1 from the configuration (LOCKSTEP_ON_TIMEOUT), LOCKSTEP_ON_TIMEOUT_END or
     * LOCKSTEP_ON_TIMEOUT_RAISE (see lockstep_comm_options_t). Appended in 1.x: a struct_size without it reads -1. */
    int32_t on_timeout;
    int32_t reserved2; /* 0 (not read) */
} lockstep_init_options_t;
#define LOCKSTEP_INIT_OPTIONS_INIT \
    { sizeof(lockstep_init_options_t), 0, -1, 0, -1.0, NULL, -1, 0 }

/* Use lockstep_init. Collective over every process (it also makes the world communicator and runs lockstep's
 * start-up checks). Initialises MPI unless the program (or mpi4py, or another library) already did, in which case
 * lockstep adopts it and will never finalise it. Idempotent: later calls return the same runtime. Once MPI is
 * finalised (by lockstep_finalize or the program) it cannot start again: LOCKSTEP_ERROR_INVALID_USAGE. */
LOCKSTEP_C_API lockstep_status_t lockstep_init_versioned(int32_t header_version, const lockstep_init_options_t* options,
                                                         lockstep_runtime_t* runtime);
/* Passes this header's version: a library older than the header, or of another major version, answers
 * LOCKSTEP_ERROR_VERSION. runtime may be NULL. */
static inline lockstep_status_t lockstep_init(const lockstep_init_options_t* options, lockstep_runtime_t* runtime) {
    return lockstep_init_versioned(LOCKSTEP_C_VERSION, options, runtime);
}
LOCKSTEP_C_API int32_t lockstep_is_initialized(void);
/* Frees lockstep's communicators and calls MPI_Finalize only if lockstep initialised MPI. Idempotent. */
LOCKSTEP_C_API lockstep_status_t lockstep_finalize(void);
/* Rank and size of the runtime's processes, local rank and size on this node. Any pointer may be NULL.
 * LOCKSTEP_ERROR_INVALID_USAGE before lockstep_init. */
LOCKSTEP_C_API lockstep_status_t lockstep_runtime_identity(lockstep_runtime_t runtime, int32_t* rank, int32_t* size,
                                                           int32_t* local_rank, int32_t* local_size);
/* 1 when lockstep called MPI_Init (and will call MPI_Finalize), 0 when it adopted an MPI already running. */
LOCKSTEP_C_API int32_t lockstep_runtime_owns_mpi(lockstep_runtime_t runtime);

/* ------------------------------------------------------------------------------------------------ communicators */
typedef struct lockstep_comm_options {
    size_t struct_size;
    uint64_t flags;        /* none defined yet: 0 */
    int32_t debug;         /* -1 from the configuration, 0 off, 1 on */
    int32_t shared_memory; /* -1 default, 0 off, 1 on (when the node's arena is active) */
    double timeout;        /* seconds; < 0 from the configuration, 0 no watchdog */
    /* What a call that outlives the timeout does: -1 from the configuration (LOCKSTEP_ON_TIMEOUT), or one of the
     * LOCKSTEP_ON_TIMEOUT_* values below. Appended in 1.x: a struct_size without it reads -1. */
    int32_t on_timeout;
    int32_t reserved2; /* 0 (not read) */
} lockstep_comm_options_t;
#define LOCKSTEP_COMM_OPTIONS_INIT \
    { sizeof(lockstep_comm_options_t), 0, -1, -1, -1.0, -1, 0 }
/* on_timeout: END prints the watchdog's report and ends the job with exit code 124 (the default). RAISE fails the
 * stuck collective with LOCKSTEP_ERROR_TIMEOUT on the processes that waited (the last error is the report: the ranks
 * that never arrived and what they were doing) and leaves the communicator broken: every later call on it returns
 * LOCKSTEP_ERROR_TIMEOUT at once; free it (no MPI call is made then) and go on with other communicators. RAISE runs
 * the communicator's collectives on its progress thread and needs one: LOCKSTEP_ERROR_CONFIG where there is none
 * (MPI below MPI_THREAD_MULTIPLE, or LOCKSTEP_PROGRESS_THREAD off). Sends and receives always end the job. */
#define LOCKSTEP_ON_TIMEOUT_END 0
#define LOCKSTEP_ON_TIMEOUT_RAISE 1

/* The communicator over the runtime's processes (made by lockstep_init: no communication here). Free the handle with
 * lockstep_comm_free; the world communicator itself lives until lockstep_finalize. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_world(lockstep_comm_t* comm);
/* From a Fortran handle (MPI_Comm_c2f; what mpi4py's Comm.py2f() gives), duplicated: the caller's communicator is
 * never used for lockstep's traffic or freed by lockstep. Collective over that communicator. A value that is no live
 * communicator's handle is LOCKSTEP_ERROR_INVALID_ARGUMENT (where MPI can tell; a freed handle's index reused by MPI
 * cannot be told apart). */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_from_fortran(int64_t fortran_handle,
                                                            const lockstep_comm_options_t* options,
                                                            lockstep_comm_t* comm);
/* Collective over comm, like MPI_Comm_split. A process with color LOCKSTEP_UNDEFINED_COLOR gets a NULL handle. */
#define LOCKSTEP_UNDEFINED_COLOR (-32766)
LOCKSTEP_C_API lockstep_status_t lockstep_comm_split(lockstep_comm_t comm, int32_t color, int32_t key,
                                                     lockstep_comm_t* out);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_dup(lockstep_comm_t comm, lockstep_comm_t* out);
/* A communicator of the listed ranks of comm (in that order), created by those ranks only (MPI_Comm_create_group):
 * the other ranks do not take part. Every member passes the same list and tag. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_create_group(lockstep_comm_t comm, const int32_t* ranks, size_t count,
                                                            int32_t tag, lockstep_comm_t* out);
/* lockstep_comm_split, lockstep_comm_dup and lockstep_comm_create_group with options for the new communicator: what
 * they leave at "from the configuration" (-1) comes from comm (debug, timeout, shared_memory, on_timeout). options may
 * be NULL. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_split_with_options(lockstep_comm_t comm, int32_t color, int32_t key,
                                                                  const lockstep_comm_options_t* options,
                                                                  lockstep_comm_t* out);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_dup_with_options(lockstep_comm_t comm,
                                                                const lockstep_comm_options_t* options,
                                                                lockstep_comm_t* out);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_create_group_with_options(lockstep_comm_t comm, const int32_t* ranks,
                                                                         size_t count, int32_t tag,
                                                                         const lockstep_comm_options_t* options,
                                                                         lockstep_comm_t* out);
/* The communicator's on_timeout (LOCKSTEP_ON_TIMEOUT_END or LOCKSTEP_ON_TIMEOUT_RAISE), and whether a call on it
 * timed out in raise mode (1: it is broken, every call returns LOCKSTEP_ERROR_TIMEOUT). Either pointer may be NULL. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_get_on_timeout(lockstep_comm_t comm, int32_t* on_timeout,
                                                              int32_t* timed_out);
/* 1 when the communicator's non-blocking collectives run on its progress thread (the progress_thread setting, and MPI
 * with MPI_THREAD_MULTIPLE), 0 when they run inside wait and test on the calling thread. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_get_progress_thread(lockstep_comm_t comm, int32_t* on);
/* Frees the handle (and the communicator, unless it is the world's). Every member, in the same order, and never
 * while another thread is in a call on it. NULL is a no-op; a handle freed already is LOCKSTEP_ERROR_INVALID_ARGUMENT.
 */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_free(lockstep_comm_t comm);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_rank(lockstep_comm_t comm, int32_t* rank);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_size(lockstep_comm_t comm, int32_t* size);
/* The communicator's Fortran handle (MPI_Comm_c2f of lockstep's duplicate). */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_fortran_handle(lockstep_comm_t comm, int64_t* fortran_handle);
/* Debug mode: switch it on every rank at the same point. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_set_debug(lockstep_comm_t comm, int32_t on);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_get_debug(lockstep_comm_t comm, int32_t* on);
LOCKSTEP_C_API lockstep_status_t lockstep_comm_get_timeout(lockstep_comm_t comm, double* seconds);
/* The loop step carried by later signatures in debug mode (0: none). */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_set_step(lockstep_comm_t comm, uint64_t step);
/* The watchdog's verdict: LOCKSTEP_ERROR_TIMEOUT with its report in *text once a call of this process was found
 * stuck (the job then ends within seconds), LOCKSTEP_OK and "" while none was. text may be NULL. The verdict is a
 * state, not a failure of this call: it does not change lockstep_last_error(). */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_get_async_error(lockstep_comm_t comm, const char** text);
/* The last error raised by a call on this communicator ("" when none), as a copy valid until this thread's next
 * call of this function. */
LOCKSTEP_C_API const char* lockstep_comm_last_error(lockstep_comm_t comm);
/* Ends every process of the job with exit code `code`, after logging `reason` (NULL: none). Returns only on error. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_abort(lockstep_comm_t comm, int32_t code, const char* reason);

/* ------------------------------------------------------------------------------------------------ tensors */
typedef int32_t lockstep_dtype_t;
enum {
    LOCKSTEP_FLOAT32 = 0,
    LOCKSTEP_FLOAT64 = 1,
    LOCKSTEP_FLOAT16 = 2,
    LOCKSTEP_BFLOAT16 = 3,
    LOCKSTEP_INT8 = 4,
    LOCKSTEP_UINT8 = 5,
    LOCKSTEP_INT32 = 6,
    LOCKSTEP_INT64 = 7,
    LOCKSTEP_BOOL = 8,
    LOCKSTEP_INT16 = 9,
    LOCKSTEP_UINT16 = 10,
    LOCKSTEP_UINT32 = 11,
    LOCKSTEP_UINT64 = 12,
    LOCKSTEP_COMPLEX64 = 13, /* two float32, real part first (C's float _Complex) */
    LOCKSTEP_COMPLEX128 = 14 /* two float64 (double _Complex) */
};
typedef int32_t lockstep_device_type_t;
enum { LOCKSTEP_DEVICE_CPU = 0, LOCKSTEP_DEVICE_CUDA = 1 };
typedef struct lockstep_device {
    lockstep_device_type_t type;
    int32_t index; /* the CUDA device; 0 for the CPU */
} lockstep_device_t;

/* lockstep_tensor_wrap flags. */
#define LOCKSTEP_TENSOR_READ_ONLY (UINT64_C(1) << 0)

/* A new tensor of `ndim` dimensions (0 for a scalar), uninitialised. */
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_empty(const int64_t* shape, int32_t ndim, lockstep_dtype_t dtype,
                                                       lockstep_device_t device, lockstep_tensor_t* out);
/* A tensor over the caller's memory, not copied: contiguous, row-major, aligned to its element size.
 * `deleter(context)` is called exactly once when the last reference is gone (never under a lock of lockstep); it may
 * be NULL. When this function fails the deleter is not called: the memory stays the caller's. Otherwise the memory
 * must stay valid until the deleter runs.
 * With LOCKSTEP_TENSOR_READ_ONLY, collectives refuse to write into it. */
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_wrap(void* data, const int64_t* shape, int32_t ndim,
                                                      lockstep_dtype_t dtype, lockstep_device_t device, uint64_t flags,
                                                      void (*deleter)(void* context), void* context,
                                                      lockstep_tensor_t* out);
/* References: a new handle starts at 1. Release with a NULL handle is a no-op; a release after the last one (and any
 * other use of the handle then) is LOCKSTEP_ERROR_INVALID_ARGUMENT. */
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_retain(lockstep_tensor_t tensor);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_release(lockstep_tensor_t tensor);
/* Getters. The shape pointer stays valid as long as the tensor. */
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_data(lockstep_tensor_t tensor, void** data);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_ndim(lockstep_tensor_t tensor, int32_t* ndim);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_shape(lockstep_tensor_t tensor, const int64_t** shape);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_numel(lockstep_tensor_t tensor, int64_t* numel);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_nbytes(lockstep_tensor_t tensor, size_t* nbytes);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_dtype(lockstep_tensor_t tensor, lockstep_dtype_t* dtype);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_device(lockstep_tensor_t tensor, lockstep_device_t* device);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_is_read_only(lockstep_tensor_t tensor, int32_t* read_only);
/* Copies between the tensor (any device) and host memory of nbytes == the tensor's size in bytes. */
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_copy_to_host(lockstep_tensor_t tensor, void* host, size_t nbytes);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_copy_from_host(lockstep_tensor_t tensor, const void* host,
                                                                size_t nbytes);
/* Size of one element of a dtype in bytes (0 for an unknown dtype). Never fails. */
LOCKSTEP_C_API size_t lockstep_dtype_size(lockstep_dtype_t dtype);
/* "float32", ... ("unknown" for an unknown dtype). Never fails. */
LOCKSTEP_C_API const char* lockstep_dtype_name(lockstep_dtype_t dtype);

/* ------------------------------------------------------------------------------------------------ DLPack */
/* lockstep_tensor_from_dlpack* flags. */
#define LOCKSTEP_DLPACK_ALLOW_COPY (UINT64_C(1) << 0) /* copy non-contiguous input instead of refusing it */

/* Export without copying. The consumer owns *out and calls its deleter exactly once; the tensor stays alive until
 * then. A read-only tensor is exported with DLPACK_FLAG_BITMASK_READ_ONLY (versioned form only: the legacy form has no
 * flags, so a read-only tensor is refused there, LOCKSTEP_ERROR_READ_ONLY, unless flags has
 * LOCKSTEP_DLPACK_EXPORT_READ_ONLY_AS_WRITABLE). bool exports as DLPack bool (code 6, 8 bits). */
#define LOCKSTEP_DLPACK_EXPORT_READ_ONLY_AS_WRITABLE (UINT64_C(1) << 0)
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_to_dlpack(lockstep_tensor_t tensor, uint64_t flags,
                                                           DLManagedTensor** out);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_to_dlpack_versioned(lockstep_tensor_t tensor, uint64_t flags,
                                                                     DLManagedTensorVersioned** out);
/* Import. On success lockstep owns `managed` and calls its deleter exactly once, when the last reference to the new
 * tensor is gone (or at once when it copied). On failure the caller still owns it. Devices: CPU, CUDA, CUDA host
 * (imported as CPU memory). Strides must be contiguous (NULL or row-major; a dimension of size 1 may have any stride)
 * unless LOCKSTEP_DLPACK_ALLOW_COPY. A versioned tensor with READ_ONLY gives a read-only tensor; a major version
 * other than 1 is LOCKSTEP_ERROR_VERSION. */
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_from_dlpack(DLManagedTensor* managed, uint64_t flags,
                                                             lockstep_tensor_t* out);
LOCKSTEP_C_API lockstep_status_t lockstep_tensor_from_dlpack_versioned(DLManagedTensorVersioned* managed,
                                                                       uint64_t flags, lockstep_tensor_t* out);

/* ------------------------------------------------------------------------------------------------ collectives */
/* Which dtypes each op takes: sum and prod every dtype; max and min the real ones (not complex); mean the floating and
 * complex ones; band, bor and bxor the integer ones and bool (on bool: logical and, or, xor; sum and max are any, prod
 * and min all). Another pair is LOCKSTEP_ERROR_DTYPE (in debug mode, on every rank).
 * LOCKSTEP_PREMUL_SUM (floating and complex dtypes): the sum of every rank's input multiplied by that rank's own
 * factor first, passed as the `factor` of the lockstep_*_premul_sum functions (the plain functions use 1). The input
 * is not written, unless the call is in place: then it receives the premultiplied sum. */
typedef int32_t lockstep_reduce_op_t;
enum {
    LOCKSTEP_SUM = 0,
    LOCKSTEP_PROD = 1,
    LOCKSTEP_MAX = 2,
    LOCKSTEP_MIN = 3,
    LOCKSTEP_MEAN = 4,
    LOCKSTEP_BAND = 5,
    LOCKSTEP_BOR = 6,
    LOCKSTEP_BXOR = 7,
    LOCKSTEP_PREMUL_SUM = 8
};

/* Per-call options: where the caller is (the debug-mode report and the watchdog name this place instead of
 * lockstep's), a tag naming the call in reports, and the CUDA stream the tensors' pending work is ordered on
 * (lockstep waits for it before the collective starts; NULL: the device is synchronised as usual). The strings are
 * copied. */
typedef struct lockstep_call_options {
    size_t struct_size;
    uint64_t flags;       /* none defined yet: 0 */
    void* cuda_stream;    /* a cudaStream_t, or NULL */
    const char* file;     /* NULL: not given */
    int32_t line;         /* 0: not given */
    int32_t reserved;     /* 0 (not read) */
    const char* function; /* NULL: not given */
    const char* tag;      /* NULL: none */
    /* LOCKSTEP_PREMUL_SUM only: this rank's factor (it may differ between ranks). Not given (an older struct): 1. */
    double premul_factor;
} lockstep_call_options_t;
#define LOCKSTEP_CALL_OPTIONS_INIT \
    { sizeof(lockstep_call_options_t), 0, NULL, NULL, 0, 0, NULL, NULL, 1.0 }

/* Every collective below is called by every rank of comm. Where a function takes an input and an output, passing the
 * same handle for both works in place (where the shapes allow). Outputs are the caller's tensors of the shape the
 * operation produces; results are written into their memory. */
LOCKSTEP_C_API lockstep_status_t lockstep_barrier(lockstep_comm_t comm, const lockstep_call_options_t* options);
/* root's input to every rank's output; output may equal input (the root's is then only read). Non-roots' input may
 * be NULL; where given, every rank checks its output against it, as the root does. */
LOCKSTEP_C_API lockstep_status_t lockstep_broadcast(lockstep_comm_t comm, lockstep_tensor_t input,
                                                    lockstep_tensor_t output, int32_t root,
                                                    const lockstep_call_options_t* options);
/* The reduction at root's output (other ranks' output is not written and may be NULL or the input; any other output
 * is checked as the root's is). */
LOCKSTEP_C_API lockstep_status_t lockstep_reduce(lockstep_comm_t comm, lockstep_tensor_t input,
                                                 lockstep_tensor_t output, lockstep_reduce_op_t op, int32_t root,
                                                 const lockstep_call_options_t* options);
LOCKSTEP_C_API lockstep_status_t lockstep_allreduce(lockstep_comm_t comm, lockstep_tensor_t input,
                                                    lockstep_tensor_t output, lockstep_reduce_op_t op,
                                                    const lockstep_call_options_t* options);
/* Inputs [d0, ...] concatenated in rank order into [size * d0, ...] (a 0-d input gives [size]). gather: at root only
 * (other ranks' output may be NULL or the input; any other output is checked as the root's is). */
LOCKSTEP_C_API lockstep_status_t lockstep_gather(lockstep_comm_t comm, lockstep_tensor_t input,
                                                 lockstep_tensor_t output, int32_t root,
                                                 const lockstep_call_options_t* options);
LOCKSTEP_C_API lockstep_status_t lockstep_allgather(lockstep_comm_t comm, lockstep_tensor_t input,
                                                    lockstep_tensor_t output, const lockstep_call_options_t* options);
/* root's [size * k, ...] input split along dimension 0: rank i's output gets rows [i k, (i + 1) k). Non-roots' input
 * may be NULL. */
LOCKSTEP_C_API lockstep_status_t lockstep_scatter(lockstep_comm_t comm, lockstep_tensor_t input,
                                                  lockstep_tensor_t output, int32_t root,
                                                  const lockstep_call_options_t* options);
/* Reduction of [size * k, ...] inputs; rank i's output [k, ...] gets rows [i k, (i + 1) k). */
LOCKSTEP_C_API lockstep_status_t lockstep_reduce_scatter(lockstep_comm_t comm, lockstep_tensor_t input,
                                                         lockstep_tensor_t output, lockstep_reduce_op_t op,
                                                         const lockstep_call_options_t* options);
/* Block i of dimension 0 ([size * k, ...]) goes to rank i; output (same shape) holds the blocks received in rank
 * order. */
LOCKSTEP_C_API lockstep_status_t lockstep_alltoall(lockstep_comm_t comm, lockstep_tensor_t input,
                                                   lockstep_tensor_t output, const lockstep_call_options_t* options);
/* Uneven alltoall (MPI_Alltoallv), counts in rows of dimension 0 (a row: every dimension after the first), `size`
 * entries each: the first send_counts[0] rows of input go to rank 0, the next send_counts[1] to rank 1, ...; output
 * ([sum of recv_counts, ...], not the input) receives recv_counts[j] rows from each rank j, in rank order. Blocks may
 * be empty. send_counts must add up to input's first dimension, and send_counts[j] here must equal recv_counts[i] on
 * rank j: debug mode checks it (and dtype and the other dimensions), every rank then failing with
 * LOCKSTEP_ERROR_DISTRIBUTED. No counts are exchanged otherwise. */
LOCKSTEP_C_API lockstep_status_t lockstep_alltoallv(lockstep_comm_t comm, lockstep_tensor_t input,
                                                    const int64_t* send_counts, lockstep_tensor_t output,
                                                    const int64_t* recv_counts, const lockstep_call_options_t* options);
/* Concatenation along dimension 0 of inputs whose first dimension differs between ranks: a new tensor. */
LOCKSTEP_C_API lockstep_status_t lockstep_gather_uneven(lockstep_comm_t comm, lockstep_tensor_t input,
                                                        lockstep_tensor_t* result,
                                                        const lockstep_call_options_t* options);
/* For bindings that convert their arguments before a collective (Python, other FFIs): when that conversion fails
 * on this rank, call this instead of the collective, so that the other ranks, already in it, are not left waiting. In
 * debug mode every rank's call then fails with LOCKSTEP_ERROR_CALL_REJECTED naming this rank and `message`; otherwise
 * this returns LOCKSTEP_ERROR_INVALID_ARGUMENT with `message` at once. `root` and `reduce_op` as the call would have
 * had them (-1 and LOCKSTEP_SUM where it has none). */
typedef int32_t lockstep_collective_t;
enum {
    LOCKSTEP_COLLECTIVE_BARRIER = 0,
    LOCKSTEP_COLLECTIVE_BROADCAST = 1,
    LOCKSTEP_COLLECTIVE_REDUCE = 2,
    LOCKSTEP_COLLECTIVE_ALLREDUCE = 3,
    LOCKSTEP_COLLECTIVE_GATHER = 4,
    LOCKSTEP_COLLECTIVE_ALLGATHER = 5,
    LOCKSTEP_COLLECTIVE_SCATTER = 6,
    LOCKSTEP_COLLECTIVE_REDUCE_SCATTER = 7,
    LOCKSTEP_COLLECTIVE_ALLTOALL = 8,
    LOCKSTEP_COLLECTIVE_GATHER_UNEVEN = 9,
    LOCKSTEP_COLLECTIVE_ALLTOALLV = 10
};
LOCKSTEP_C_API lockstep_status_t lockstep_reject_call(lockstep_comm_t comm, lockstep_collective_t collective,
                                                      int32_t root, lockstep_reduce_op_t reduce_op, const char* message,
                                                      const lockstep_call_options_t* options);
/* The names of the values above, as lockstep's reports and the Python package spell them: "allreduce",
 * "reduce_scatter", ...; "sum", "prod", "max", "min", "mean". NULL for a value that names none, so that a binding can
 * list them all by counting up from 0 until NULL. The strings are static. */
LOCKSTEP_C_API const char* lockstep_collective_name(lockstep_collective_t collective);
LOCKSTEP_C_API const char* lockstep_reduce_op_name(lockstep_reduce_op_t op);
/* Point to point (watched by the watchdog, never signature-checked). recv's source may be LOCKSTEP_ANY_SOURCE;
 * *actual_source (may be NULL) receives the sender's rank. */
#define LOCKSTEP_ANY_SOURCE (-1)
LOCKSTEP_C_API lockstep_status_t lockstep_send(lockstep_comm_t comm, lockstep_tensor_t tensor, int32_t dest,
                                               int32_t tag, const lockstep_call_options_t* options);
LOCKSTEP_C_API lockstep_status_t lockstep_recv(lockstep_comm_t comm, lockstep_tensor_t output, int32_t source,
                                               int32_t tag, int32_t* actual_source,
                                               const lockstep_call_options_t* options);

/* ------------------------------------------------------------------------------------------------ non-blocking */
/* Every operation above has a non-blocking form, lockstep_i<name>, with the same arguments followed by a request:
 * it returns at once with *request set (NULL when the call itself fails). The operation's own errors come at its wait
 * or test: for a collective, the errors of its arguments too (a rejected call, as for the blocking forms: in debug
 * mode the same error on every rank), so that no rank is left waiting for one that returned early; a send's or
 * receive's argument errors are returned at once. A NULL comm or request is an error at once.
 * Collectives are issued in the same order on every rank and run in that order on the communicator's progress thread
 * (or inside wait/test when it has none); a blocking collective issued meanwhile runs after them. Sends and receives
 * match in any order. Any number of requests may be outstanding and waited for in any order, from any thread.
 * The operation keeps its tensors alive until it completes, whatever handles the caller releases (a wrapped
 * tensor's deleter does not run before then): do not write an input, nor read an output, before its wait or test has
 * reported completion. An output is written as by the blocking form, and complete once wait or test reports it (for
 * reduce, gather, scatter, alltoall and a half-precision reduce_scatter, the result is copied into the output by that
 * call). A request is freed with lockstep_request_free, waited for or not; the operation of one freed before then
 * still runs (those five may then leave their output unwritten), and is named in a warning when its communicator is
 * freed or the runtime finalizes. */
typedef struct lockstep_request_s* lockstep_request_t;

LOCKSTEP_C_API lockstep_status_t lockstep_ibarrier(lockstep_comm_t comm, const lockstep_call_options_t* options,
                                                   lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_ibroadcast(lockstep_comm_t comm, lockstep_tensor_t input,
                                                     lockstep_tensor_t output, int32_t root,
                                                     const lockstep_call_options_t* options,
                                                     lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_ireduce(lockstep_comm_t comm, lockstep_tensor_t input,
                                                  lockstep_tensor_t output, lockstep_reduce_op_t op, int32_t root,
                                                  const lockstep_call_options_t* options, lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_iallreduce(lockstep_comm_t comm, lockstep_tensor_t input,
                                                     lockstep_tensor_t output, lockstep_reduce_op_t op,
                                                     const lockstep_call_options_t* options,
                                                     lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_igather(lockstep_comm_t comm, lockstep_tensor_t input,
                                                  lockstep_tensor_t output, int32_t root,
                                                  const lockstep_call_options_t* options, lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_iallgather(lockstep_comm_t comm, lockstep_tensor_t input,
                                                     lockstep_tensor_t output, const lockstep_call_options_t* options,
                                                     lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_iscatter(lockstep_comm_t comm, lockstep_tensor_t input,
                                                   lockstep_tensor_t output, int32_t root,
                                                   const lockstep_call_options_t* options, lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_ireduce_scatter(lockstep_comm_t comm, lockstep_tensor_t input,
                                                          lockstep_tensor_t output, lockstep_reduce_op_t op,
                                                          const lockstep_call_options_t* options,
                                                          lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_ialltoall(lockstep_comm_t comm, lockstep_tensor_t input,
                                                    lockstep_tensor_t output, const lockstep_call_options_t* options,
                                                    lockstep_request_t* request);
/* The counts are copied at issue. */
LOCKSTEP_C_API lockstep_status_t lockstep_ialltoallv(lockstep_comm_t comm, lockstep_tensor_t input,
                                                     const int64_t* send_counts, lockstep_tensor_t output,
                                                     const int64_t* recv_counts, const lockstep_call_options_t* options,
                                                     lockstep_request_t* request);
/* The new tensor is given by lockstep_request_result once the request has completed. */
LOCKSTEP_C_API lockstep_status_t lockstep_igather_uneven(lockstep_comm_t comm, lockstep_tensor_t input,
                                                         const lockstep_call_options_t* options,
                                                         lockstep_request_t* request);
LOCKSTEP_C_API lockstep_status_t lockstep_isend(lockstep_comm_t comm, lockstep_tensor_t tensor, int32_t dest,
                                                int32_t tag, const lockstep_call_options_t* options,
                                                lockstep_request_t* request);
/* source may be LOCKSTEP_ANY_SOURCE; lockstep_request_source gives the sender once completed. */
LOCKSTEP_C_API lockstep_status_t lockstep_irecv(lockstep_comm_t comm, lockstep_tensor_t output, int32_t source,
                                                int32_t tag, const lockstep_call_options_t* options,
                                                lockstep_request_t* request);
/* lockstep_reject_call's non-blocking form, for a binding whose argument conversion failed where it would issue a
 * non-blocking collective: the request's wait returns what lockstep_reject_call returns (in debug mode every rank's
 * wait for that collective returns LOCKSTEP_ERROR_CALL_REJECTED). */
LOCKSTEP_C_API lockstep_status_t lockstep_ireject_call(lockstep_comm_t comm, lockstep_collective_t collective,
                                                       int32_t root, lockstep_reduce_op_t reduce_op,
                                                       const char* message, const lockstep_call_options_t* options,
                                                       lockstep_request_t* request);
/* Blocks until the operation has completed; returns its status (the same status and text on every call). An operation
 * still running when lockstep_finalize ran can no longer complete: LOCKSTEP_ERROR_INVALID_USAGE. */
LOCKSTEP_C_API lockstep_status_t lockstep_request_wait(lockstep_request_t request);
/* Waits at most `seconds` (>= 0): *completed is 1 and the operation's status is returned when it completed, else
 * *completed is 0 and LOCKSTEP_OK is returned. Without a progress thread a collective runs to its end inside this
 * call whatever the time limit. */
LOCKSTEP_C_API lockstep_status_t lockstep_request_wait_for(lockstep_request_t request, double seconds,
                                                           int32_t* completed);
/* Makes progress without blocking (without a progress thread, runs the queue up to this operation): as wait_for. */
LOCKSTEP_C_API lockstep_status_t lockstep_request_test(lockstep_request_t request, int32_t* completed);
/* Once completed (LOCKSTEP_ERROR_INVALID_USAGE before; the operation's status if it failed): the rank a receive got
 * its message from (-1 for other operations); the new tensor of lockstep_igather_uneven (a new reference for the
 * caller; NULL for other operations). */
LOCKSTEP_C_API lockstep_status_t lockstep_request_source(lockstep_request_t request, int32_t* source);
LOCKSTEP_C_API lockstep_status_t lockstep_request_result(lockstep_request_t request, lockstep_tensor_t* result);
/* Releases the handle (NULL: a no-op), never waiting. A freed handle used again, or freed again, is
 * LOCKSTEP_ERROR_INVALID_ARGUMENT. */
LOCKSTEP_C_API lockstep_status_t lockstep_request_free(lockstep_request_t request);

/* ------------------------------------------------------------------------------------------------ foreign calls */
/* Collectives that another library carries for comm's processes (gloo or NCCL under a torch process group): lockstep
 * moves no data, but checks and watches them as it does its own.
 * lockstep_foreign_begin, on every rank before it issues the call: numbers the call (*call) and puts it on the
 * watchdog's board; in debug mode exchanges its signature (collective, dtype, shape, device, root, reduce op, and the
 * call site and tag of `options`) and compares it as for lockstep's own collectives: a mismatch fails on every rank
 * with LOCKSTEP_ERROR_SIGNATURE_MISMATCH and the same text, and the call is then off the board (do not issue it).
 * dtype -1: none (a barrier, or a type lockstep does not know); shape: ndim dimensions (NULL when ndim is 0);
 * varying_dim: a dimension allowed to differ between ranks (an uneven alltoall: 0), else -1; root -1 and reduce_op
 * -1 where the call has none. options' cuda_stream is not read.
 * lockstep_foreign_end, from any thread, once the carrier reports the call complete. Any number of calls may be
 * outstanding and end in any order; the board shows the oldest not yet ended, so that a call that outlives comm's
 * timeout is reported as lockstep's own are (which ranks never arrived, each rank's call site) and the job ends.
 * A communicator that carries foreign calls should carry no collectives of lockstep's own; its on_timeout is not
 * applied to them. Ending a call twice, or a number never begun, does nothing. */
LOCKSTEP_C_API lockstep_status_t lockstep_foreign_begin(lockstep_comm_t comm, lockstep_collective_t collective,
                                                        lockstep_dtype_t dtype, const int64_t* shape, int32_t ndim,
                                                        lockstep_device_type_t device, int32_t varying_dim,
                                                        int32_t root, lockstep_reduce_op_t reduce_op,
                                                        const lockstep_call_options_t* options, uint64_t* call);
LOCKSTEP_C_API lockstep_status_t lockstep_foreign_end(lockstep_comm_t comm, uint64_t call);
/* Names the library that carries comm's foreign calls ("gloo"): the watchdog's reports say "... in calls carried by
 * gloo". */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_set_carrier(lockstep_comm_t comm, const char* name);

/* ------------------------------------------------------------------------------------------------ agreements */
/* Sets this process's trigger (no communication). */
LOCKSTEP_C_API lockstep_status_t lockstep_set_trigger(lockstep_comm_t comm);
/* Collective: *triggered is 1 on every rank if any rank set its trigger since the last check; clears it everywhere. */
LOCKSTEP_C_API lockstep_status_t lockstep_check_trigger(lockstep_comm_t comm, int32_t* triggered,
                                                        const lockstep_call_options_t* options);

/* The batch-size search. fn returns LOCKSTEP_OK when the size worked, LOCKSTEP_ERROR_OUT_OF_MEMORY when it ran out of
 * memory (then every rank retries smaller), anything else to stop the search on every rank. */
typedef lockstep_status_t (*lockstep_batch_fn)(int64_t batch_size, void* user_data);
typedef struct lockstep_batch_size_options {
    size_t struct_size;
    uint64_t flags;  /* LOCKSTEP_BATCH_REFINE_UPWARD */
    double factor;   /* next size after an out-of-memory: floor(size * factor), in (0, 1) */
    int64_t minimum; /* sizes below it are not tried */
} lockstep_batch_size_options_t;
#define LOCKSTEP_BATCH_REFINE_UPWARD (UINT64_C(1) << 0)
#define LOCKSTEP_BATCH_SIZE_OPTIONS_INIT \
    { sizeof(lockstep_batch_size_options_t), 0, 0.5, 1 }
/* Calls fn(size) on every rank until it succeeds on every rank; *batch_size gets the size that worked. When fn fails
 * with another code on this rank, the search returns LOCKSTEP_ERROR_CALLBACK here and LOCKSTEP_ERROR_DISTRIBUTED on the
 * others. */
LOCKSTEP_C_API lockstep_status_t lockstep_find_executable_batch_size(lockstep_comm_t comm, int64_t starting_batch_size,
                                                                     lockstep_batch_fn fn, void* user_data,
                                                                     const lockstep_batch_size_options_t* options,
                                                                     int64_t* batch_size);
/* Releases every allocator's cached blocks. */
LOCKSTEP_C_API lockstep_status_t lockstep_free_memory(void);
/* Seeds lockstep's generators and rand(); with device_specific != 0 each process adds its rank. */
LOCKSTEP_C_API lockstep_status_t lockstep_set_seed(uint64_t seed, int32_t device_specific);

/* ------------------------------------------------------------------------------------------------ logging */
typedef int32_t lockstep_log_level_t;
enum {
    LOCKSTEP_LOG_DEBUG = 0,
    LOCKSTEP_LOG_INFO = 1,
    LOCKSTEP_LOG_WARNING = 2,
    LOCKSTEP_LOG_ERROR = 3,
    LOCKSTEP_LOG_CRITICAL = 4
};
typedef int32_t lockstep_log_scope_t;
enum {
    LOCKSTEP_LOG_MAIN_PROCESS = 0, /* rank 0 only (the default of lockstep's logging) */
    LOCKSTEP_LOG_EVERY_RANK = 1,   /* every rank, as it comes */
    LOCKSTEP_LOG_IN_RANK_ORDER = 2 /* collective over the world: every rank's record, printed in rank order */
};
/* A record through lockstep's rank-aware logging, under logger `logger` (NULL: "lockstep.c"). */
LOCKSTEP_C_API lockstep_status_t lockstep_log(const char* logger, lockstep_log_level_t level,
                                              lockstep_log_scope_t scope, const char* message);

#ifdef __cplusplus
}
#endif
#endif /* LOCKSTEP_H */
