#!/usr/bin/env bash
# OpenSHMEM test programs on a ring fabric of 2, 3, 4 and 5 PEs (a ring of
# two is one link): non-neighbours are reached through forwarded queue
# pairs; barriers and collectives go neighbour to neighbour
# (tests/shmem/runner.sh).
exec bash "$(dirname "$0")/shmem/runner.sh" ring
