"""Hook implementations of toolkernel-graphrag."""

from __future__ import annotations
