// What a Fortran MPI entry point turns into C before it calls the C function: handles (MPI_Fint), Fortran's
// sentinels (MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS(ES)_IGNORE, which are the addresses of common blocks), LOGICALs,
// 1-based indices and the arrays of requests and statuses the completion calls take. entry_points.py generates the
// entry points out of these pieces; every entry point converts its arguments exactly as the MPI's own Fortran
// bindings do (Open MPI's ompi/mpi/fortran/mpif-h/*_f.c, MPICH's mpi_f08 module), so that the C call is the one the
// program would have made.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

#if defined(OPEN_MPI)
// Open MPI's Fortran sentinels: common blocks that libmpi.so defines and mpif.h, `use mpi` and `use mpi_f08` name
// (nm -D libmpi.so: mpi_fortran_in_place_, ...). Weak, so that a libmpi without Fortran support still loads the
// library; an absent one is a null address, which no Fortran argument matches (the comparisons check for it).
extern "C" {
extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_bottom_ __attribute__((weak));
extern int mpi_fortran_status_ignore_ __attribute__((weak));
extern int mpi_fortran_statuses_ignore_ __attribute__((weak));
extern int mpi_fortran_unweighted_ __attribute__((weak));
extern int mpi_fortran_weights_empty_ __attribute__((weak));
}
#endif

namespace lockstep::check::fortran {

static_assert(sizeof(MPI_Fint) == sizeof(int), "count and displacement arrays are passed to C as they are");
// gfortran's .TRUE.; any non-zero LOGICAL reads as true.
inline constexpr MPI_Fint kTrue = 1;

inline bool is_sentinel(const void* argument, const void* sentinel) noexcept {
    return sentinel != nullptr && argument == sentinel;
}

// A Fortran status: Open MPI's INTEGER array of MPI_STATUS_SIZE (mpif.h, `use mpi`, and mpi_f08's TYPE(MPI_Status),
// which has its layout); MPICH's mpi_f08 TYPE(MPI_Status), the only one that reaches this library under MPICH.
#if defined(OPEN_MPI)
inline constexpr std::size_t kStatusSize = sizeof(MPI_Status) / sizeof(MPI_Fint);
inline const void* status_ignore() noexcept {
    return &mpi_fortran_status_ignore_;
}
inline const void* statuses_ignore() noexcept {
    return &mpi_fortran_statuses_ignore_;
}
inline void write_status(const MPI_Status* c, MPI_Fint* fortran) noexcept {
    MPI_Status_c2f(c, fortran);
}
#elif defined(MPICH)
// MPI_Status_c2f08 lives in libmpichfort, which a C program does not load: the two structs have the same fields in
// the same order (mpi.h says so), so the status is copied.
static_assert(sizeof(MPI_F08_status) == sizeof(MPI_Status), "MPICH's mpi_f08 status is its C status");
inline constexpr std::size_t kStatusSize = sizeof(MPI_F08_status) / sizeof(MPI_Fint);
inline const void* status_ignore() noexcept {
    return MPI_F08_STATUS_IGNORE;
}
inline const void* statuses_ignore() noexcept {
    return MPI_F08_STATUSES_IGNORE;
}
inline void write_status(const MPI_Status* c, MPI_Fint* fortran) noexcept {
    std::memcpy(fortran, c, sizeof(*c));
}
#endif

#if defined(OPEN_MPI)
// A choice buffer: MPI_IN_PLACE and MPI_BOTTOM arrive as the addresses of their common blocks.
inline void* choice_buffer(void* fortran) noexcept {
    if (is_sentinel(fortran, &mpi_fortran_in_place_)) return MPI_IN_PLACE;
    if (is_sentinel(fortran, &mpi_fortran_bottom_)) return MPI_BOTTOM;
    return fortran;
}

// The weights of a distributed graph: MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY are sentinels too.
inline const int* graph_weights(MPI_Fint* fortran) noexcept {
    if (is_sentinel(fortran, &mpi_fortran_unweighted_)) return MPI_UNWEIGHTED;
    if (is_sentinel(fortran, &mpi_fortran_weights_empty_)) return MPI_WEIGHTS_EMPTY;
    return fortran;
}
#endif

// The number of dimensions of a Cartesian communicator (the length of MPI_Cart_sub's remain_dims).
inline MPI_Fint cartesian_dimensions(MPI_Fint comm) noexcept {
    int dimensions = 0;
    PMPI_Cartdim_get(MPI_Comm_f2c(comm), &dimensions);
    return dimensions;
}

// How many processes an alltoallw exchanges with: the communicator's size, the remote group's for an intercommunicator.
inline MPI_Fint peers(MPI_Fint comm) noexcept {
    const MPI_Comm c = MPI_Comm_f2c(comm);
    int inter = 0;
    int size = 0;
    PMPI_Comm_test_inter(c, &inter);
    if (inter != 0) {
        PMPI_Comm_remote_size(c, &size);
    } else {
        PMPI_Comm_size(c, &size);
    }
    return size;
}

inline void set_error(MPI_Fint* ierror, int rc) noexcept {
    if (ierror != nullptr) *ierror = static_cast<MPI_Fint>(rc);  // optional in mpi_f08
}

inline MPI_Fint logical(int value) noexcept {
    return value != 0 ? kTrue : 0;
}

// A Fortran index is 1-based; MPI_UNDEFINED stays itself.
inline MPI_Fint fortran_index(int c_index) noexcept {
    return c_index == MPI_UNDEFINED ? static_cast<MPI_Fint>(MPI_UNDEFINED) : static_cast<MPI_Fint>(c_index + 1);
}

// One status out: MPI_STATUS_IGNORE passes through, anything else is converted back after the call.
class StatusOut {
public:
    explicit StatusOut(MPI_Fint* fortran) noexcept
        : fortran_(is_sentinel(fortran, status_ignore()) ? nullptr : fortran) {}
    MPI_Status* c() noexcept { return fortran_ == nullptr ? MPI_STATUS_IGNORE : &c_; }
    void write_back() noexcept {
        if (fortran_ != nullptr) write_status(&c_, fortran_);
    }

private:
    MPI_Fint* fortran_;
    MPI_Status c_{};
};

// Room for n converted elements: on the stack for the common small counts, on the heap beyond.
template <class T, std::size_t kInline = 16>
class Scratch {
public:
    explicit Scratch(MPI_Fint n) noexcept {
        const std::size_t count = n > 0 ? static_cast<std::size_t>(n) : 0;
        if (count > kInline) heap_.reset(new (std::nothrow) T[count]);
        data_ = count > kInline ? heap_.get() : inline_;
    }
    [[nodiscard]] bool ok() const noexcept { return data_ != nullptr; }
    T* data() noexcept { return data_; }
    T& operator[](std::size_t i) noexcept { return data_[i]; }

private:
    T inline_[kInline];
    std::unique_ptr<T[]> heap_;
    T* data_;
};

// An array of requests, read before the call and written back after it (completed ones become MPI_REQUEST_NULL).
class RequestArray {
public:
    RequestArray(MPI_Fint* fortran, MPI_Fint count) noexcept : fortran_(fortran), count_(count), c_(count) {
        if (!c_.ok()) return;
        for (MPI_Fint i = 0; i < count_; ++i) c_[i] = MPI_Request_f2c(fortran_[i]);
    }
    [[nodiscard]] bool ok() const noexcept { return c_.ok(); }
    MPI_Request* c() noexcept { return c_.data(); }
    void write_back() noexcept {
        for (MPI_Fint i = 0; i < count_; ++i) fortran_[i] = MPI_Request_c2f(c_[i]);
    }

private:
    MPI_Fint* fortran_;
    MPI_Fint count_;
    Scratch<MPI_Request> c_;
};

// An array in, converted element by element.
template <class T, class Convert>
class ArrayIn {
public:
    ArrayIn(const MPI_Fint* fortran, MPI_Fint count) noexcept : c_(count) {
        if (!c_.ok()) return;
        for (MPI_Fint i = 0; i < count; ++i) c_[i] = Convert{}(fortran[i]);
    }
    [[nodiscard]] bool ok() const noexcept { return c_.ok(); }
    T* c() noexcept { return c_.data(); }

private:
    Scratch<T> c_;
};

struct LogicalToInt {
    int operator()(MPI_Fint value) const noexcept { return value != 0 ? 1 : 0; }
};
struct DatatypeF2c {
    MPI_Datatype operator()(MPI_Fint handle) const noexcept { return MPI_Type_f2c(handle); }
};
// LOGICALs as C ints (MPI_Cart_create's periods, MPI_Cart_sub's remain_dims), datatypes (alltoallw's, one per peer).
using LogicalArray = ArrayIn<int, LogicalToInt>;
using TypeArray = ArrayIn<MPI_Datatype, DatatypeF2c>;

// An array of statuses out; MPI_STATUSES_IGNORE passes through.
class StatusArray {
public:
    StatusArray(MPI_Fint* fortran, MPI_Fint count) noexcept
        : fortran_(is_sentinel(fortran, statuses_ignore()) ? nullptr : fortran), c_(fortran_ == nullptr ? 0 : count) {}
    [[nodiscard]] bool ok() const noexcept { return c_.ok(); }
    MPI_Status* c() noexcept { return fortran_ == nullptr ? MPI_STATUSES_IGNORE : c_.data(); }
    // Only the first `filled` statuses hold results (all of them for waitall, outcount for waitsome).
    void write_back(MPI_Fint filled) noexcept {
        if (fortran_ == nullptr) return;
        for (MPI_Fint i = 0; i < filled; ++i) write_status(&c_[i], fortran_ + i * kStatusSize);
    }

private:
    MPI_Fint* fortran_;
    Scratch<MPI_Status> c_;
};

}  // namespace lockstep::check::fortran
