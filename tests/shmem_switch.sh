#!/usr/bin/env bash
# OpenSHMEM test programs on a switch fabric, 2/4/8 PEs (tests/shmem/runner.sh).
exec bash "$(dirname "$0")/shmem/runner.sh" switch
