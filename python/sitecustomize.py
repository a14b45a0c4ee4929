"""laggard's automatic sections for PyTorch: the hook into Python's start-up (docs/pytorch.md).

Python imports the first `sitecustomize` module on sys.path. `laggard run` puts this file's
directory first on PYTHONPATH, so every Python process of the job (torchrun's workers too)
runs this. It does almost nothing: when laggard is this process' NVTX tool, it asks to be told
when `torch` is imported, and only then loads laggard_torch (beside this file) to add the
sections. Then it runs the sitecustomize this one hides (Debian's, a virtualenv's), as Python
would have without laggard.

Off with LAGGARD_TORCH=0 (or LAGGARD_ENABLE=0).
"""


def _laggard_wanted():
    import os
    env = os.environ
    if env.get("LAGGARD_TORCH", "1") == "0" or env.get("LAGGARD_ENABLE", "1") == "0":
        return False
    # liblaggard.so names itself NVTX's tool when it loads; that is the process laggard captures.
    return "laggard" in os.path.basename(env.get("NVTX_INJECTION64_PATH", ""))


class _LaggardTorchWatcher:
    """A meta-path finder that answers for nobody: it notices `import torch`, lets the other
    finders find it, and has laggard_torch patch the module once it is fully executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import sys
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return None
        import importlib.util
        spec = importlib.util.find_spec("torch")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_patch(module):
            exec_module(module)
            try:
                import os
                here = os.path.dirname(os.path.abspath(__file__))
                lt_spec = importlib.util.spec_from_file_location("laggard_torch", os.path.join(here, "laggard_torch.py"))
                laggard_torch = importlib.util.module_from_spec(lt_spec)
                sys.modules["laggard_torch"] = laggard_torch
                lt_spec.loader.exec_module(laggard_torch)
                laggard_torch.install(module)
            except Exception as e:  # never the reason a job fails
                sys.stderr.write("laggard: automatic PyTorch sections off: %s\n" % e)

        loader.exec_module = exec_then_patch
        return spec


def _laggard_chain():
    """Runs the sitecustomize module this one hides, if any (Python imports only the first)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    if _laggard_wanted():
        import sys as _sys
        if "torch" not in _sys.modules:
            _sys.meta_path.insert(0, _LaggardTorchWatcher())
except Exception:
    pass
_laggard_chain()
