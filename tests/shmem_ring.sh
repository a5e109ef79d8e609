#!/usr/bin/env bash
# OpenSHMEM test programs on a ring fabric of 3 and 5 PEs: non-neighbours
# are reached through forwarded queue pairs (tests/shmem/runner.sh).
exec bash "$(dirname "$0")/shmem/runner.sh" ring
