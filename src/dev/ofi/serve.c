/* SPDX-License-Identifier: MIT */
/*
 * ntbx_dev_serve (dev/dev.h): the node agent of the fabric's backend, for
 * `ntbx node serve`.  Built into the ntbx command with the agent
 * (agent*.c, the only libfabric user), not into libntbx; built without
 * libfabric too, to say why there is no agent.
 */
#include <errno.h>

#include "dev/dev.h"
#include "dev/ofi/ofi.h"
#include "util/util.h"

int ntbx_dev_serve(const struct ntbx_dev_serve_opts *o)
{
	/* ofi is the one backend with an agent; on a fabric of another
	 * backend (or none) the agent says so and how to make one */
#ifdef NTBX_HAVE_OFI
	return ofi_agent_run(o);
#else
	return ntbx_err(ENOTSUP, "this ntbx was built without libfabric "
	                "(install libfabric-dev, see scripts/deps.d/ofi.txt, and "
	                "rebuild): it cannot serve fabric '%s'", o->fabric);
#endif
}
