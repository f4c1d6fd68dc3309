"""nibble: small LLMs, fast, on edge CPUs — the Python binding of libnibble (ctypes).

    import nibble
    with nibble.Model("kjv-7m-f32.gguf", weights="source") as m:
        print(m.create_completion("In the beginning", max_tokens=16, temperature=0)
              ["choices"][0]["text"])

The library is found through $NIBBLE_LIB, beside this package, or the system loader
(python/README.md). Errors of the library are raised as NibbleError with its message.
"""

from ._lib import NibbleError
from ._model import Model

__version__ = "0.1.0"
__all__ = ["Model", "NibbleError", "library_version"]


def library_version():
    """The version of the libnibble.so in use ("0.1.0")."""
    from . import _lib
    return _lib.lib().nb_version().decode()
