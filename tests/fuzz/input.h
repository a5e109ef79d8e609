/*
 * Reading a fuzz input as a sequence of fields: take() copies the next
 * @n bytes, or zeroes @out and returns 0 once the input runs out, so a
 * target can read a fixed layout from an input of any length.
 */
#ifndef NTBX_FUZZ_INPUT_H
#define NTBX_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct in {
	const uint8_t *p;
	size_t n;
};

static inline int take(struct in *in, void *out, size_t n)
{
	if (in->n < n) {
		memset(out, 0, n);
		return 0;
	}
	memcpy(out, in->p, n);
	in->p += n;
	in->n -= n;
	return 1;
}

#endif
