/*
 * A fuzz target's own fabric: a private NTBX_SHM_DIR under /dev/shm (the
 * target's atexit handler removes the fabric and then the directory) and a
 * two-node switch fabric of 4 MiB nodes named @name in it.  Aborts, saying
 * why, if it cannot be made.
 */
#ifndef NTBX_FUZZ_FABRIC_H
#define NTBX_FUZZ_FABRIC_H

#include <stdio.h>
#include <stdlib.h>

#include "ntbx/dev.h"
#include "ntbx/fabric.h"

static inline void fuzz_fabric_make(const char *name)
{
	static char root[] = "/dev/shm/ntbx-fuzz-XXXXXX";
	static int made;
	if (!made) {   /* one directory for all of a target's fabrics */
		if (!mkdtemp(root))
			abort();
		setenv("NTBX_SHM_DIR", root, 1);
		made = 1;
	}
	struct ntbx_fabric_params p = { .nodes = 2, .topology = NTBX_TOPO_SWITCH,
	                                .window = 4 << 20, .gid = -1 };
	if (ntbx_fabric_create(name, &p)) {
		fprintf(stderr, "fuzz: cannot make fabric %s: %s\n", name,
		        ntbx_errmsg());
		abort();
	}
}

#endif
