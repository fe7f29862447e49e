"""Type stubs of the compiled module (see python/LatticeNative.cpp)."""

from typing import Any

SCHEMA_DIGEST: str
IR_VERSION: int

def verify(text: str) -> tuple[bool, str]: ...
def import_plan(text: str) -> tuple[bool, str, dict[str, Any] | None]: ...
def dialect_ops() -> list[dict[str, Any]]: ...
