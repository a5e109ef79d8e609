/* SPDX-License-Identifier: MIT */
/* Per-thread error messages for ntbx_errmsg(). */
#include <stdio.h>

#include "ntbx/dev.h"
#include "util/util.h"

static _Thread_local char errbuf[512];

int ntbx_err(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	va_end(ap);
	ntbx_log(NTBX_LOG_DEBUG, "%s", errbuf);
	return -err;
}

void ntbx_err_clear(void)
{
	errbuf[0] = 0;
}

const char *ntbx_errmsg(void)
{
	return errbuf;
}
