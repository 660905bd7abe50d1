#pragma once
// LOCKSTEP_API marks what liblockstep.so exports. The library is compiled with hidden visibility, so a declaration
// without it stays inside the library: internals (namespace detail, the kernels' backends, the collectives' wire
// formats) cannot become part of the ABI by accident. Public classes carry it so that their out-of-line members,
// vtables and typeinfo are exported: an exception thrown inside the library is then caught by type in the program.
// LOCKSTEP_HIDDEN keeps a member of an exported class inside the library (a nested class takes the visibility of the
// class around it otherwise), such as the implementation behind a pointer.

#if defined(__GNUC__) || defined(__clang__)
#define LOCKSTEP_API __attribute__((visibility("default")))
#define LOCKSTEP_HIDDEN __attribute__((visibility("hidden")))
#else
#define LOCKSTEP_API
#define LOCKSTEP_HIDDEN
#endif
