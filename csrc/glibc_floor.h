// Pre-included into every translation unit by tools/builder/op.py (--glibc-floor 2.28, the default): keep the
// library's glibc symbol versions at or below 2.28, the manylinux_2_28 floor of Hub kernels (kernel-abi-check),
// when it is compiled against newer glibc headers (Debian 12: 2.36, Ubuntu 24.04: 2.39). With glibc 2.28
// headers (conda-forge's sysroot, kernel-builder) both blocks below are no-ops.
#pragma once

#include <features.h>

// glibc >= 2.38 redirects strtol/strtoul/sscanf/... to __isoc23_* (GLIBC_2.38) whenever C23 features are on,
// which g++'s implied _GNU_SOURCE turns on. The C23 behaviour (a "0b" prefix in strtol) is not used here.
#ifdef __GLIBC_USE_C2X_STRTOL
#undef __GLIBC_USE_C2X_STRTOL
#define __GLIBC_USE_C2X_STRTOL 0
#endif
#ifdef __GLIBC_USE_C23_STRTOL
#undef __GLIBC_USE_C23_STRTOL
#define __GLIBC_USE_C23_STRTOL 0
#endif

// glibc >= 2.32 has <sys/single_threaded.h>; libstdc++ (<ext/atomicity.h>) then reads __libc_single_threaded
// (GLIBC_2.32) to skip atomic reference counting in single-threaded processes. Older glibc has no such fast
// path; neither does this library: the variable is replaced by a constant "maybe multi-threaded", so every
// reference count update stays atomic, which is always correct.
#if defined(__GLIBC__) && defined(__cplusplus) && __has_include(<sys/single_threaded.h>)
#define _SYS_SINGLE_THREADED_H 1  // glibc's header (and its declaration) is skipped from here on
#define __libc_single_threaded img2gray_glibc_floor_maybe_multithreaded
static constexpr char img2gray_glibc_floor_maybe_multithreaded = 0;
#endif
