"""A stand-in `jax` for `gpuman doctor`'s tests: only the calls its probe makes
(docs/doctor.md), answering from $FAKE_JAX (JSON: version, platform, count, error). Not
JAX. Absent $FAKE_JAX: not importable."""
import json as _json
import os as _os
import types as _types

if "FAKE_JAX" not in _os.environ:
    raise ImportError("No module named 'jax' (the stand-in answers only with $FAKE_JAX)")

_spec = _json.loads(_os.environ["FAKE_JAX"])
__version__ = _spec.get("version", "0.4.30")


def devices(backend=None):
    if "error" in _spec:
        raise RuntimeError(_spec["error"])
    platform = _spec.get("platform", "gpu")
    return [_types.SimpleNamespace(id=i, platform=platform) for i in range(int(_spec.get("count", 1)))]
