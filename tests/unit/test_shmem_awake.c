/* The rule by which an OpenSHMEM wait counts another PE of its machine as
 * awake (src/shmem/shmem_awake.h): no thread of it asleep in a wait, or a
 * sleeper kicked since it went to sleep (its wake sequence moved past the
 * one it sleeps on), which is runnable and ours, not foreign load. */
#include "harness.h"
#include "shmem/shmem_awake.h"

int main(void)
{
	th_init("shmem_awake");
	/* no sleeper: computing or spinning */
	CHECK_EQ(ntbx_sh_line_awake(0, 7, 7), 1);
	CHECK_EQ(ntbx_sh_line_awake(0, 8, 7), 1);
	/* asleep on the sequence it reads: asleep */
	CHECK_EQ(ntbx_sh_line_awake(1, 7, 7), 0);
	CHECK_EQ(ntbx_sh_line_awake(2, 7, 7), 0);
	/* kicked since (one kick or several), not yet running: awake */
	CHECK_EQ(ntbx_sh_line_awake(1, 8, 7), 1);
	CHECK_EQ(ntbx_sh_line_awake(1, 12, 7), 1);
	/* across the sequence's wrap */
	CHECK_EQ(ntbx_sh_line_awake(1, 0, UINT32_MAX), 1);
	CHECK_EQ(ntbx_sh_line_awake(1, UINT32_MAX, UINT32_MAX), 0);
	/* a garbled count from a peer's memory is only a count */
	CHECK_EQ(ntbx_sh_line_awake(-5, 7, 7), 1);
	return th_done("test_shmem_awake");
}
