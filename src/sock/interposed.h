/* SPDX-License-Identifier: MIT */
/*
 * interposed.h — the prototypes of the preload's wrappers, made from
 * interposed.def: each with default visibility (the library is built
 * -fvisibility=hidden, so nothing else is exported) and glibc's types (a
 * wrapper that disagrees with its prototype does not compile).
 */
#ifndef NTBX_SOCK_INTERPOSED_H
#define NTBX_SOCK_INTERPOSED_H

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Marks a wrapper's definition (its prototype below already says it). */
#define EXPORT __attribute__((visibility("default")))

#define SK_CALL(ret, name, params) EXPORT ret name params;
#define SK_REAL(ret, name, params)
#include "sock/interposed.def"
#undef SK_CALL
#undef SK_REAL

#endif
