#!/usr/bin/env bash
# The same OpenSHMEM test programs built and run with Open MPI's OSHMEM:
# proof that they test the specification, not ntbx.
exec bash "$(dirname "$0")/shmem/runner.sh" ompi
