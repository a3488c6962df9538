"""Neural vehicle routing: a multi-task VRP library shared by its chapter.

The chapter's module is ``iclr_lab.routing.ccl_vrp`` (see the registry in iclr_lab.core); the
environment, the solution checker, the policies and the reference solvers live beside it as
modules any routing code can import. Nothing here imports torch until a submodule is imported.
"""
