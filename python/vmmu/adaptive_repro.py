"""Seed 001's adaptive-paging runs under the name docs/policies.md gave them:
:mod:`vmmu.repro.bae11.adaptive`, where they live with the reproduction that judges them."""

from vmmu.repro.bae11.adaptive import *  # noqa: F403
