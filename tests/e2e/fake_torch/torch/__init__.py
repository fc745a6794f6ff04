"""A stand-in `torch` for `gpuman doctor`'s tests: only the calls its probe makes
(docs/doctor.md), answering from $FAKE_TORCH (JSON: version, cuda, available,
device_count, arch_list). Not PyTorch."""
import json as _json
import os as _os
import types as _types

_spec = _json.loads(_os.environ.get("FAKE_TORCH", "{}"))
__version__ = _spec.get("version", "2.5.1+cu124")
version = _types.SimpleNamespace(cuda=_spec.get("cuda", "12.4"))


class _Cuda:
    @staticmethod
    def is_available():
        return bool(_spec.get("available", True))

    @staticmethod
    def device_count():
        return int(_spec.get("device_count", 0))

    @staticmethod
    def get_arch_list():
        return list(_spec.get("arch_list", ["sm_80", "sm_86", "sm_90"]))


cuda = _Cuda()
