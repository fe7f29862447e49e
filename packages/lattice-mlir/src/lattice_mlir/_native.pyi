"""Type stubs of the compiled module (see python/LatticeNative.cpp)."""

from typing import Any

SCHEMA_DIGEST: str
IR_VERSION: int

def check(text: str, build_plan: bool) -> tuple[bool, str, dict[str, Any] | None]: ...
def dialect_ops() -> list[dict[str, Any]]: ...
def rewrite_module(
    text: str, attributes: dict[str, str | list[str]]
) -> tuple[bool, str, dict[str, Any] | None]: ...
