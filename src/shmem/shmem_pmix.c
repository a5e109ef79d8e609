/* SPDX-License-Identifier: MIT */
/*
 * Start-up under a PMIx launcher (Open MPI's mpirun, srun, PRRTE): rank
 * and size from PMIx_Init and PMIX_JOB_SIZE, and the start-up exchange
 * (every PE's record, gathered by all) through PMIx_Put, PMIx_Commit,
 * PMIx_Fence with collected data, and PMIx_Get.
 *
 * libpmix is loaded with dlopen, only when the environment says a PMIx
 * launcher started the program (PMIX_NAMESPACE): linking it would load
 * libpmix and its dependencies (libevent, hwloc) into every OpenSHMEM
 * program, including the ones oshrun starts, and cost their start-up.
 * The build needs only PMIx's headers (pkg-config pmix); the library's
 * directory (Debian puts it outside the loader's path) is recorded then.
 * Only functions are taken from the library, never its macros that call
 * into it (PMIX_INFO_LOAD, PMIX_VALUE_RELEASE).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem_int.h"
#include "util/settings.h"

int ntbx_sh_pmix_launched(void)
{
	const char *ns = ntbx_setting_str(NTBX_SET_PMIX_NAMESPACE);
	return ns && *ns;
}

#ifndef NTBX_HAVE_PMIX

void ntbx_sh_pmix_init(int *rank, int *size)
{
	(void)rank;
	(void)size;
	ntbx_sh_die("started by a PMIx launcher (PMIX_NAMESPACE is set, e.g. "
	            "Open MPI's mpirun), but libntbx-shmem was built without "
	            "PMIx: install PMIx's development files (Debian: "
	            "libpmix-dev, found with `pkg-config pmix`) and rebuild, or "
	            "start the program with oshrun");
}

void ntbx_sh_pmix_allgather(const char *key, const void *mine, size_t len,
                            void *all)
{
	(void)key; (void)mine; (void)len; (void)all;
}

void ntbx_sh_pmix_abort(int status, const char *msg)
{
	(void)status; (void)msg;
}

void ntbx_sh_pmix_finalize(void) {}

#else
#include <pmix.h>

#ifndef NTBX_PMIX_LIBDIR
#define NTBX_PMIX_LIBDIR ""
#endif

static struct {
	__typeof__(PMIx_Init) *init;
	__typeof__(PMIx_Finalize) *finalize;
	__typeof__(PMIx_Abort) *abort;
	__typeof__(PMIx_Get) *get;
	__typeof__(PMIx_Put) *put;
	__typeof__(PMIx_Commit) *commit;
	__typeof__(PMIx_Fence) *fence;
	__typeof__(PMIx_Error_string) *error_string;
	__typeof__(PMIx_Value_destruct) *value_destruct;
} px;
static pmix_proc_t me;
static int up, npes;

static void load(void)
{
	char path[512];
	void *h = NULL;
	const char *why = "";
	if (*NTBX_PMIX_LIBDIR) {
		snprintf(path, sizeof path, "%s/libpmix.so.2", NTBX_PMIX_LIBDIR);
		h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	}
	if (!h)
		h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		why = dlerror();
#define SYM(f, name) \
	if (h && !(px.f = (__typeof__(px.f))dlsym(h, name))) { \
		why = "it lacks " name; \
		h = NULL; \
	}
	SYM(init, "PMIx_Init")
	SYM(finalize, "PMIx_Finalize")
	SYM(abort, "PMIx_Abort")
	SYM(get, "PMIx_Get")
	SYM(put, "PMIx_Put")
	SYM(commit, "PMIx_Commit")
	SYM(fence, "PMIx_Fence")
	SYM(error_string, "PMIx_Error_string")
	SYM(value_destruct, "PMIx_Value_destruct")
#undef SYM
	if (!h)
		ntbx_sh_die("started by a PMIx launcher (PMIX_NAMESPACE is set), "
		            "but libpmix cannot be loaded (looked in '%s' and the "
		            "loader's path): %s", NTBX_PMIX_LIBDIR, why);
}

static void set_key(char *k, const char *s)
{
	memset(k, 0, PMIX_MAX_KEYLEN + 1);
	strncpy(k, s, PMIX_MAX_KEYLEN);
}

static void value_free(pmix_value_t *v)
{
	if (v) {
		px.value_destruct(v);
		free(v);
	}
}

void ntbx_sh_pmix_init(int *rank, int *size)
{
	load();
	pmix_status_t rc = px.init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS)
		ntbx_sh_die("PMIx_Init: %s (PMIX_NAMESPACE is set, but the "
		            "launcher's PMIx server does not answer)",
		            px.error_string(rc));
	up = 1;
	pmix_proc_t wild = me;
	wild.rank = PMIX_RANK_WILDCARD;
	pmix_value_t *v = NULL;
	rc = px.get(&wild, PMIX_JOB_SIZE, NULL, 0, &v);
	if (rc != PMIX_SUCCESS || !v || v->type != PMIX_UINT32)
		ntbx_sh_die("PMIx_Get(PMIX_JOB_SIZE): %s", rc != PMIX_SUCCESS ?
		            px.error_string(rc) : "not a uint32");
	uint32_t n = v->data.uint32;
	value_free(v);
	if (n < 1 || n > NTBX_MAX_NODES || me.rank >= n)
		ntbx_sh_die("PMIx says rank %u of %u PEs: ntbx runs 1 to %d PEs",
		            me.rank, n, NTBX_MAX_NODES);
	*rank = (int)me.rank;
	*size = npes = (int)n;
}

void ntbx_sh_pmix_allgather(const char *key, const void *mine, size_t len,
                            void *all)
{
	char k[PMIX_MAX_KEYLEN + 1];
	set_key(k, key);
	pmix_value_t val;
	memset(&val, 0, sizeof val);
	val.type = PMIX_BYTE_OBJECT;
	val.data.bo.bytes = (char *)mine;
	val.data.bo.size = len;
	pmix_status_t rc = px.put(PMIX_GLOBAL, k, &val);
	if (rc == PMIX_SUCCESS)
		rc = px.commit();
	if (rc != PMIX_SUCCESS)
		ntbx_sh_die("PMIx_Put(%s): %s", key, px.error_string(rc));
	/* Bounded: a PE that never arrives ends the start-up with an error
	 * (the launcher ends the job when it sees a PE die). */
	pmix_info_t info[2];
	memset(info, 0, sizeof info);
	set_key(info[0].key, PMIX_COLLECT_DATA);
	info[0].value.type = PMIX_BOOL;
	info[0].value.data.flag = true;
	set_key(info[1].key, PMIX_TIMEOUT);
	info[1].value.type = PMIX_INT;
	info[1].value.data.integer = 60;
	rc = px.fence(NULL, 0, info, 2);
	if (rc != PMIX_SUCCESS)
		ntbx_sh_die("PMIx_Fence (start-up exchange %s, 60 s): %s", key,
		            px.error_string(rc));
	for (int j = 0; j < npes; j++) {
		pmix_proc_t p = me;
		p.rank = (pmix_rank_t)j;
		pmix_value_t *v = NULL;
		rc = px.get(&p, k, NULL, 0, &v);
		if (rc != PMIX_SUCCESS || !v || v->type != PMIX_BYTE_OBJECT ||
		    v->data.bo.size != len)
			ntbx_sh_die("PMIx_Get of PE %d's %s: %s", j, key,
			            rc != PMIX_SUCCESS ? px.error_string(rc) :
			            "not what this libntbx-shmem puts (another "
			            "program or version?)");
		memcpy((char *)all + (size_t)j * len, v->data.bo.bytes, len);
		value_free(v);
	}
}

void ntbx_sh_pmix_abort(int status, const char *msg)
{
	if (up)
		px.abort(status, msg, NULL, 0);
}

void ntbx_sh_pmix_finalize(void)
{
	if (up)
		px.finalize(NULL, 0);
	up = 0;
}
#endif
