"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["Ceilings", "DeviceSpec", "device", "measure_ceilings", "spec", "specs", "sync", ]

class Ceilings:  # noqa: D101
    pass

class DeviceSpec:  # noqa: D101
    pass

def device(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("device is not written yet")

def measure_ceilings(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("measure_ceilings is not written yet")

def spec(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("spec is not written yet")

def specs(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("specs is not written yet")

def sync(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("sync is not written yet")

