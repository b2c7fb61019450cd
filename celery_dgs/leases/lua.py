"""The Lua scripts of ``scripts/``, registered once per Redis client."""

from __future__ import annotations

from ..connection import ScriptSet

SCRIPTS = ScriptSet("celery_dgs.leases", "scripts", prelude="_prelude.lua")
