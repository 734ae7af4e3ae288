"""toolkernel-oauth's hooks (imports stay cheap: everything heavy loads inside the factories)."""

from __future__ import annotations
