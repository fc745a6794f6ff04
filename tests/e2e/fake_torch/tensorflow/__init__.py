"""A stand-in `tensorflow` for `gpuman doctor`'s tests: only the calls its probe makes
(docs/doctor.md), answering from $FAKE_TF (JSON: version, is_cuda_build, cuda_version,
cuda_compute_capabilities, gpus). Not TensorFlow. Absent $FAKE_TF: not importable."""
import json as _json
import os as _os
import types as _types

if "FAKE_TF" not in _os.environ:
    raise ImportError("No module named 'tensorflow' (the stand-in answers only with $FAKE_TF)")

_spec = _json.loads(_os.environ["FAKE_TF"])
__version__ = _spec.get("version", "2.16.1")


def _build_info():
    info = {"is_cuda_build": bool(_spec.get("is_cuda_build", True))}
    if info["is_cuda_build"]:
        info["cuda_version"] = _spec.get("cuda_version", "12.3")
        info["cudnn_version"] = "8"
        info["cuda_compute_capabilities"] = list(
            _spec.get("cuda_compute_capabilities", ["sm_50", "sm_60", "sm_70", "sm_80", "compute_90"]))
    return info


sysconfig = _types.SimpleNamespace(get_build_info=_build_info)


def _list_physical_devices(kind=None):
    if kind not in (None, "GPU"):
        return []
    return ["/physical_device:GPU:%d" % i for i in range(int(_spec.get("gpus", 0)))]


config = _types.SimpleNamespace(list_physical_devices=_list_physical_devices)
