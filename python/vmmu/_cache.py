"""The user's cache directory for what vmmu builds and records outside the repository."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/vmmu/PARTS`` or, without it, ``~/.cache/vmmu/PARTS``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "vmmu", *parts)
