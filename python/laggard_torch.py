"""laggard's automatic sections for PyTorch (docs/pytorch.md).

Loaded by laggard's sitecustomize.py when `torch` is first imported in a process that laggard
captures. It wraps, on the main thread only:

    torch:step       from the first section of a step to the end of Optimizer.step()
                     (the next step opens at once, so steps tile the training loop)
    torch:data_load  DataLoader iteration (the iterator's __next__)
    torch:forward    the call of a top-level module (not nested in another module's call)
    torch:loss       ... when that module is a loss (torch.nn.modules.loss._Loss)
    torch:backward   torch.autograd.backward (Tensor.backward)
    torch:optimizer  Optimizer.step()

and, on any thread, the host side of every torch.distributed collective on a gloo or MPI
process group (NCCL's are timed on the GPU by laggard's NCCL plugin) as `torch:<op>@<group>`,
e.g. `torch:all_reduce@default`, including DDP's gradient all-reduce (a communication hook,
registered at the DDP model's first forward unless the program registered its own, which is
then timed instead). `laggard report` reads ranges named `<op>@<group>` as host-timed
collectives: the k-th call on a group is matched across ranks and the rank that arrived last
is named (docs/pytorch.md, "Collectives are waiting").

Ranges go to NVTX through liblaggard-pyshim.so (NVTX3 is header-only: no CUDA needed). On a
CPU build of PyTorch, torch.cuda.nvtx's functions are routed there too (they raise otherwise)
and emit_nvtx() becomes a no-op.

Nothing here may break the program: every wrapper calls the original whatever happens to the
timing, and a failure to install leaves torch as it was.
"""

import _thread
import ctypes
import functools
import os
import sys
import threading

__all__ = ["install"]

_shim = None
_main_ident = threading.main_thread().ident
_busy = 0         # 1 while an automatic section (not a collective) is open on the main thread
_step_open = False
_names = {}       # section message -> shim index
_idx = {}         # short name -> shim index of the fixed sections
_local = threading.local()  # .quiet: inside a timed DDP hook (its all_reduce is timed there)
_push = _pop = _pop_push = None  # the shim's functions, once loaded
_log_level = {"quiet": 0, "warn": 1, "info": 2, "debug": 3}.get(os.environ.get("LAGGARD_LOG", "warn"), 1)


def _say(level, message):
    if _log_level >= level:
        rank = os.environ.get("RANK", os.environ.get("LAGGARD_RANK", "?"))
        sys.stderr.write("laggard[rank %s]: %s\n" % (rank, message))


def _name(message):
    """The shim index of a section message in domain "torch" (registered once)."""
    i = _names.get(message)
    if i is None:
        i = _shim.laggard_pyshim_name(message.encode("utf-8", "replace"))
        _names[message] = i
    return i


# --- the step and the main-thread sections --------------------------------------------------
#
# Hot: every wrapper below runs once per call of what it wraps (nn.Module.__call__ for every
# module). Each keeps to one global test before calling through, and opens its section inline:
# _busy is 1 while an automatic section is open on the main thread (sections never nest, so a
# flag is enough), _step_open while the step is.

def _section_wrapper(fn, index, end_step=False):
    """fn, with section `index` around its calls on the main thread when no section is open (the
    step opened first when none is); with end_step, the step ends when fn returns, and the next
    one begins."""
    push, pop, pop_push, step_index = _push, _pop, _pop_push, _idx["step"]
    get_ident, main = _thread.get_ident, _main_ident

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _busy, _step_open
        if _busy or get_ident() != main:
            return fn(*args, **kwargs)
        if not _step_open:
            _step_open = True
            push(step_index)
        _busy = 1
        push(index)
        try:
            return fn(*args, **kwargs)
        finally:
            _busy = 0
            pop()
            if end_step:
                pop_push(step_index)

    wrapper._laggard = True
    return wrapper


def _wrap_section(fn, key):
    return _section_wrapper(fn, _idx[key])


def _patch_data_loader(torch):
    it = torch.utils.data.dataloader._BaseDataLoaderIter
    it.__next__ = _wrap_section(it.__next__, "data_load")


def _patch_modules(torch):
    Module = torch.nn.Module
    call_impl = Module.__call__
    loss_base = torch.nn.modules.loss._Loss
    ddp_class = _ddp_class(torch) or ()
    as_forward = _section_wrapper(call_impl, _idx["forward"])
    as_loss = _section_wrapper(call_impl, _idx["loss"])
    get_ident, main = _thread.get_ident, _main_ident

    # Every module call passes here; a nested one (the common case) costs one global test.
    def __call__(self, *args, **kwargs):
        if _busy or get_ident() != main:
            return call_impl(self, *args, **kwargs)
        if isinstance(self, ddp_class):
            _ddp_first_forward(self)
        return (as_loss if isinstance(self, loss_base) else as_forward)(self, *args, **kwargs)

    __call__._laggard = True
    Module.__call__ = __call__


def _patch_backward(torch):
    torch.autograd.backward = _wrap_section(torch.autograd.backward, "backward")


def _patch_optimizer(torch):
    Optimizer = torch.optim.Optimizer
    opt_index = _idx["optimizer"]

    def wrap_step(step):  # functools.wraps keeps torch's own "hooked" mark: torch does not wrap it again
        return _section_wrapper(step, opt_index, end_step=True)

    def hook_class(obj):
        cls = type(obj)
        step = getattr(cls, "step", None)
        if step is not None and not getattr(step, "_laggard", False):
            cls.step = wrap_step(step)

    init = Optimizer.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            hook_class(self)
        except Exception:
            pass

    setstate = Optimizer.__setstate__

    @functools.wraps(setstate)
    def __setstate__(self, state):
        setstate(self, state)
        try:
            hook_class(self)
        except Exception:
            pass

    Optimizer.__init__ = __init__
    Optimizer.__setstate__ = __setstate__


# --- collectives ------------------------------------------------------------------------------

# torch.distributed's collectives (1.13 names and later ones), the op as laggard names it.
_COLLECTIVES = {
    "all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce", "reduce": "reduce",
    "broadcast": "broadcast", "all_gather": "all_gather", "all_gather_coalesced": "all_gather",
    "_all_gather_base": "all_gather", "all_gather_into_tensor": "all_gather", "gather": "gather",
    "scatter": "scatter", "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "all_to_all": "all_to_all", "all_to_all_single": "all_to_all",
    "barrier": "barrier", "monitored_barrier": "barrier",
}


class _Groups:
    """Names process groups as every rank does: the default group "default", others by the name
    torch gave them (new_group counts on every rank, members or not)."""

    def __init__(self, c10d):
        self.c10d = c10d
        names = getattr(c10d, "_pg_names", None)  # torch 1.x; 2.x keeps them in _world
        self.names = names if names is not None else getattr(getattr(c10d, "_world", None), "pg_names", {})

    def section(self, op, group):
        """The shim index of `op@group`, or None when the call is not timed on the host."""
        c10d = self.c10d
        world = c10d.GroupMember.WORLD
        pg = group if group is not None else world
        if pg is None or pg is c10d.GroupMember.NON_GROUP_MEMBER:
            return None
        if "nccl" in str(c10d.get_backend(pg)).lower():  # timed on the GPU by laggard's NCCL plugin
            return None
        name = "default" if pg is world else "pg" + str(self.names.get(pg, "?"))
        return _name(op + "@" + name)


def _argument(fn, name):
    """Where `fn` takes argument `name`: (position, default); (None, None) when it has none."""
    import inspect
    params = list(inspect.signature(fn).parameters.values())
    for i, p in enumerate(params):
        if p.name == name:
            return i, (None if p.default is inspect.Parameter.empty else p.default)
    return None, None


def _wrap_collective(fn, op, groups):
    group_at, group_default = _argument(fn, "group")
    async_at, _ = _argument(fn, "async_op")
    if group_at is None:
        return fn

    def given(args, kwargs, name, at, default):
        return kwargs[name] if name in kwargs else args[at] if at is not None and len(args) > at else default

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if getattr(_local, "quiet", False):
            return fn(*args, **kwargs)
        try:
            index = groups.section(op, given(args, kwargs, "group", group_at, group_default))
            is_async = bool(given(args, kwargs, "async_op", async_at, False))
        except Exception:
            index = None
        if index is None:
            return fn(*args, **kwargs)
        if is_async:  # from the call to the work's completion, on whichever thread completes it
            rid = _shim.laggard_pyshim_start(index)
            try:
                work = fn(*args, **kwargs)
            except BaseException:
                _shim.laggard_pyshim_end(rid)
                raise
            _end_with_work(rid, work)
            return work
        _push(index)
        try:
            return fn(*args, **kwargs)
        finally:
            _pop()

    wrapper._laggard = True
    return wrapper


def _end_with_work(rid, work):
    """Ends range `rid` when an async collective's work completes (now, if that cannot be known)."""
    try:
        work.get_future().add_done_callback(lambda _: _shim.laggard_pyshim_end(rid))
    except Exception:
        _shim.laggard_pyshim_end(rid)


def _patch_collectives(torch):
    dist = torch.distributed
    c10d = dist.distributed_c10d
    groups = _Groups(c10d)
    for fname, op in _COLLECTIVES.items():
        fn = getattr(c10d, fname, None)
        if fn is None or getattr(fn, "_laggard", False):
            continue
        wrapped = _wrap_collective(fn, op, groups)
        setattr(c10d, fname, wrapped)
        if getattr(dist, fname, None) is fn:
            setattr(dist, fname, wrapped)
    return groups


# --- DDP: its gradient all-reduce, through a communication hook --------------------------------

def _ddp_class(torch):
    try:
        return torch.nn.parallel.DistributedDataParallel
    except Exception:
        return None


_groups = None  # _Groups, once collectives are patched


class _Dispatch:
    """The hook laggard registers with a DDP model at its first forward. A DDP model takes one
    hook, once: a hook the program registers later (register_comm_hook, a built-in one, a fused
    optimizer) takes this one's place inside it, as if it had been registered first."""

    def __init__(self, hook):
        self.state, self.hook = None, hook

    def __call__(self, _state, bucket):
        return self.hook(self.state, bucket)


def _timed_hook(index, hook):
    """`hook` (state, bucket) -> Future, timed from its call (the bucket is ready: this rank's
    arrival) to the future's completion (the all-reduce is done)."""

    @functools.wraps(hook)
    def timed(state, bucket):
        rid = _shim.laggard_pyshim_start(index)
        _local.quiet = True  # the hook's own all_reduce call is timed here, not again
        try:
            fut = hook(state, bucket)
        except BaseException:
            _shim.laggard_pyshim_end(rid)
            raise
        finally:
            _local.quiet = False
        if rid:
            try:
                fut.add_done_callback(lambda _: _shim.laggard_pyshim_end(rid))
            except Exception:
                _shim.laggard_pyshim_end(rid)
        return fut

    timed._laggard = True
    return timed


def _ddp_index(ddp):
    if _groups is None:
        return None
    try:
        return _groups.section("all_reduce", ddp.process_group)
    except Exception:
        return None


def _dispatch_function(dispatch):
    """A plain function DDP accepts as a hook (it checks the signature and logs the name)."""
    import torch

    def allreduce_hook(state, bucket: torch.distributed.GradBucket) -> torch.futures.Future[torch.Tensor]:
        return dispatch(state, bucket)

    allreduce_hook.__qualname__ = "laggard.allreduce_hook"
    return allreduce_hook


def _ddp_first_forward(ddp):
    """At a DDP model's first forward: time its gradient all-reduce (DDP's default, as a Python
    hook) unless the program chose how DDP communicates."""
    if ddp.__dict__.get("_laggard_ddp") is not None:
        return
    ddp.__dict__["_laggard_ddp"] = "seen"
    index = _ddp_index(ddp)
    if index is None:
        return
    try:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        dispatch = _Dispatch(_timed_hook(index, default_hooks.allreduce_hook))
        dispatch.state = ddp.process_group
        _original_register(ddp, None, _dispatch_function(dispatch))
        ddp.__dict__["_laggard_ddp"] = dispatch
    except Exception as e:
        _say(2, "DDP's all-reduce is not timed (%s)" % e)


_original_register = None


def _builtin_equivalent(comm_hook_type):
    """The Python hook that does what a built-in DDP hook does, or None."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    name = getattr(comm_hook_type, "name", str(comm_hook_type)).split(".")[-1]
    return {"ALLREDUCE": default_hooks.allreduce_hook, "FP16_COMPRESS": default_hooks.fp16_compress_hook}.get(name)


def _patch_ddp(torch):
    global _original_register
    DDP = _ddp_class(torch)
    if DDP is None:
        return
    register = _original_register = DDP.register_comm_hook

    @functools.wraps(register)
    def register_comm_hook(self, state, hook):
        mine = self.__dict__.get("_laggard_ddp")
        index = _ddp_index(self)
        timed = _timed_hook(index, hook) if index is not None else hook
        if isinstance(mine, _Dispatch):
            self._check_comm_hook(hook)
            self.logger._set_comm_hook_name(hook.__qualname__)
            mine.state, mine.hook = state, timed
            return None
        self.__dict__["_laggard_ddp"] = "program"
        return register(self, state, timed)

    DDP.register_comm_hook = register_comm_hook
    builtin = getattr(DDP, "_register_builtin_comm_hook", None)
    if builtin is None:
        return

    @functools.wraps(builtin)
    def _register_builtin_comm_hook(self, comm_hook_type):
        mine = self.__dict__.get("_laggard_ddp")
        if isinstance(mine, _Dispatch):
            same = _builtin_equivalent(comm_hook_type)
            if same is not None:
                mine.state, mine.hook = self.process_group, _timed_hook(_ddp_index(self), same)
                return None
        else:
            self.__dict__["_laggard_ddp"] = "program"  # a C++ hook: DDP's all-reduce is not timed
        return builtin(self, comm_hook_type)

    DDP._register_builtin_comm_hook = _register_builtin_comm_hook


# --- torch.cuda.nvtx on CPU builds -------------------------------------------------------------

class _ShimNvtx:
    """torch.cuda.nvtx's backend (torch._C._nvtx on CUDA builds), for builds without one."""

    @staticmethod
    def rangePushA(msg):
        return _shim.laggard_pyshim_user_push(str(msg).encode("utf-8", "replace"))

    @staticmethod
    def rangePop():
        return _shim.laggard_pyshim_user_pop()

    @staticmethod
    def rangeStartA(msg):
        return _shim.laggard_pyshim_user_start(str(msg).encode("utf-8", "replace"))

    @staticmethod
    def rangeEnd(range_id):
        _shim.laggard_pyshim_user_end(ctypes.c_uint64(range_id))

    @staticmethod
    def markA(msg):
        _shim.laggard_pyshim_user_mark(str(msg).encode("utf-8", "replace"))


def _patch_cuda_nvtx(torch):
    nvtx = sys.modules.get("torch.cuda.nvtx")
    if nvtx is None:
        import torch.cuda.nvtx as nvtx
    if hasattr(torch._C, "_nvtx"):
        return  # a CUDA build: its NVTX calls reach laggard already
    nvtx._nvtx = _ShimNvtx()
    emit = torch.autograd.profiler.emit_nvtx
    enter, leave = emit.__enter__, emit.__exit__

    def __enter__(self):
        if torch.cuda.is_available():
            return enter(self)
        _say(2, "emit_nvtx() needs a CUDA build of PyTorch; ignored (laggard's automatic sections are on)")
        self.entered = True
        return self

    def __exit__(self, *exc):
        if torch.cuda.is_available():
            return leave(self, *exc)
        self.entered = False
        return False

    emit.__enter__, emit.__exit__ = __enter__, __exit__


# --- install ------------------------------------------------------------------------------------

def _load_shim():
    path = os.environ.get("LAGGARD_PYSHIM") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "liblaggard-pyshim.so")
    lib = ctypes.PyDLL(path)  # PyDLL: keeps the GIL; each call is short
    if lib.laggard_pyshim_version() != 1:
        raise OSError("%s: unknown version" % path)
    lib.laggard_pyshim_name.argtypes = [ctypes.c_char_p]
    for f in ("laggard_pyshim_push", "laggard_pyshim_pop_push"):
        getattr(lib, f).restype = None
    lib.laggard_pyshim_pop.restype = None
    lib.laggard_pyshim_start.restype = ctypes.c_uint64
    lib.laggard_pyshim_end.argtypes = [ctypes.c_uint64]
    lib.laggard_pyshim_end.restype = None
    lib.laggard_pyshim_user_start.restype = ctypes.c_uint64
    lib.laggard_pyshim_user_end.argtypes = [ctypes.c_uint64]
    lib.laggard_pyshim_user_end.restype = None
    for f in ("laggard_pyshim_user_push", "laggard_pyshim_user_start", "laggard_pyshim_user_mark"):
        getattr(lib, f).argtypes = [ctypes.c_char_p]
    return lib


_installed = False


def install(torch):
    """Wraps torch's entry points (once). Returns True when the automatic sections are on."""
    global _shim, _push, _pop, _pop_push, _installed, _groups
    if _installed:
        return True
    try:
        _shim = _load_shim()
    except Exception as e:
        _say(1, "automatic PyTorch sections off: cannot load the NVTX shim (%s)" % e)
        return False
    _push, _pop, _pop_push = _shim.laggard_pyshim_push, _shim.laggard_pyshim_pop, _shim.laggard_pyshim_pop_push
    for key in ("step", "data_load", "forward", "loss", "backward", "optimizer"):
        _idx[key] = _name(key)
    steps = [("torch.cuda.nvtx", _patch_cuda_nvtx), ("DataLoader", _patch_data_loader),
             ("nn.Module", _patch_modules), ("backward", _patch_backward), ("optimizer", _patch_optimizer)]
    for what, patch in steps:
        try:
            patch(torch)
        except Exception as e:
            _say(1, "automatic PyTorch section '%s' off: %s" % (what, e))
    try:
        if torch.distributed.is_available():
            _groups = _patch_collectives(torch)
            _patch_ddp(torch)
    except Exception as e:
        _say(1, "torch.distributed collectives are not timed: %s" % e)
    _installed = True
    _say(2, "automatic PyTorch sections on (torch %s)" % getattr(torch, "__version__", "?"))
    return True
