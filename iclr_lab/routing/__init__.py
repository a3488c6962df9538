"""Neural vehicle routing: a multi-task VRP library shared by its chapter.

The chapter's module is ``iclr_lab.routing.ccl_vrp`` (see the registry in iclr_lab.core); the
environment, the solution checker, the policies and the reference solvers live beside it as
modules any routing code can import. Nothing here imports torch until a submodule is imported.

Each module is imported when it is first used (``iclr_lab.routing.ccl_vrp``), not by
``import iclr_lab.routing``.
"""

from iclr_lab.core.lazy import exports

#: public name -> the module it is (imported on first use)
_LAZY: dict[str, str] = {
    "ccl_vrp": "iclr_lab.routing.ccl_vrp",
    "checker": "iclr_lab.routing.checker",
    "env": "iclr_lab.routing.env",
    "evaluate": "iclr_lab.routing.evaluate",
    "instances": "iclr_lab.routing.instances",
    "model": "iclr_lab.routing.model",
    "probe": "iclr_lab.routing.probe",
    "solvers": "iclr_lab.routing.solvers",
    "train": "iclr_lab.routing.train",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = exports(__name__, _LAZY, globals())
