/* SPDX-License-Identifier: MIT */
/*
 * ntbx/doorbell.h — the doorbell plan: what each of a port's 16 doorbell
 * bits (NTBX_DB_BITS) is for, in one place.
 *
 *   bit  0     control: link bring-up (fabric), the peer's new epoch
 *   bits 1..8  ring forwarding: transfer thread t waits on bit 1 + t
 *              (ntbx_qp_forwarder_start, up to NTBX_QP_MAX_THREADS)
 *   bits 9..15 queue pairs: an endpoint's sleepers wait on one of them,
 *              chosen from its offset (a hash), so event loops
 *              (ntbx_db_event_fd) register the whole range
 *
 * Every layer names the bits it rings or waits on from here; a program
 * using the device directly (ntbx_peer_db_set) must know which it shares.
 */
#ifndef NTBX_DOORBELL_H
#define NTBX_DOORBELL_H

enum ntbx_db_plan {
	NTBX_DB_CONTROL_BIT = 0,
	NTBX_DB_XFER_FIRST = 1,
	NTBX_DB_XFER_COUNT = 8,
	NTBX_DB_QP_FIRST = 9,
	NTBX_DB_QP_COUNT = 7,

	NTBX_DB_CONTROL_MASK = 1 << NTBX_DB_CONTROL_BIT,            /* 0x0001 */
	NTBX_DB_XFER_MASK = ((1 << NTBX_DB_XFER_COUNT) - 1)
	                    << NTBX_DB_XFER_FIRST,                    /* 0x01fe */
	NTBX_DB_QP_MASK = ((1 << NTBX_DB_QP_COUNT) - 1)
	                  << NTBX_DB_QP_FIRST,                        /* 0xfe00 */
};

#endif /* NTBX_DOORBELL_H */
