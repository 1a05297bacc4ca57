"""Seed 004's vCPU-scaling experiment under the name docs/python-api.md gives it:
:mod:`vmmu.repro.bhatia09.vcpus`, where it lives with the reproduction that judges it."""

from vmmu.repro.bhatia09.vcpus import *  # noqa: F403
