"""The inference engines' telemetry, kept off: nothing written into ``$HOME``, nothing sent.

Measured with ``HOME`` pointed at an empty folder (onnxruntime 1.32, openvino
2026.4, openvino-telemetry 2025.2, Linux):

* ``import onnxruntime`` starts Microsoft's 1DS telemetry: it writes a device id
  and an event store (``~/.cache/Microsoft/DeveloperTools/.onnxruntime/deviceid``,
  ``onnxruntime.db``) and uploads a process event. ONNX Runtime reads
  ``ORT_DISABLE_TELEMETRY`` (``ORT_TELEMETRY_DISABLED`` in later releases) once,
  when it starts, and keeps that choice for the life of the process.
* ``import openvino`` imports its model converter (``openvino.tools.ovc``), which
  sends an "import" event through ``openvino_telemetry`` (Google Analytics) and
  writes a client id and a usage count (``~/intel/openvino_ga_cid``,
  ``~/intel/stats``). Its only switches are a consent file in ``$HOME`` (what
  ``opt_in_out --opt_out`` writes) or a CI variable; but the converter falls back
  to a no-op stub where ``openvino_telemetry`` cannot be imported.

So :func:`engines_without_telemetry` wraps yomiage's imports of the two engines:
for the length of the import only, it sets the ONNX Runtime variables (where the
user has not set them) and makes ``openvino_telemetry`` unimportable; then it
puts both back. Nothing happens when ``yomiage`` is imported, no environment
variable outlives the import, and a program that imported an engine itself
before yomiage keeps whatever it chose.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

ORT_SWITCHES = ("ORT_DISABLE_TELEMETRY", "ORT_TELEMETRY_DISABLED")
OPENVINO_TELEMETRY = "openvino_telemetry"


@contextlib.contextmanager
def engines_without_telemetry() -> Iterator[None]:
    """Import ``onnxruntime`` or ``openvino`` inside this block to start them with their
    telemetry off (it is decided once per process, when an engine is first imported)."""
    set_here = []
    if "onnxruntime" not in sys.modules:
        for name in ORT_SWITCHES:
            if name not in os.environ:
                os.environ[name] = "1"
                set_here.append(name)
    hidden = "openvino" not in sys.modules and OPENVINO_TELEMETRY not in sys.modules
    if hidden:
        sys.modules[OPENVINO_TELEMETRY] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        yield
    finally:
        for name in set_here:
            os.environ.pop(name, None)
        if hidden and sys.modules.get(OPENVINO_TELEMETRY, 0) is None:
            del sys.modules[OPENVINO_TELEMETRY]
