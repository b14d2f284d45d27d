"""The lifetime every handle-owning object shares: close(), a context
manager that closes, and a finalizer that closes what the user forgot."""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T", bound="Closing")


class Closing:
    """Base of objects that own a C handle and free it in ``close()``."""

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
