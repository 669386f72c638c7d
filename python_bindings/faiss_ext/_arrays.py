"""torch tensors and CuPy arrays as inputs and outputs of our indexes' search and add.

As FAISS's contrib.torch_utils does for FAISS's GPU indexes: a CUDA tensor
or a CuPy array on the index's device goes to the C++ index as a device
pointer (``__cuda_array_interface__``), with no host round trip, and the
results come back as the same kind of array on the same device; a CPU torch
tensor goes through numpy (shared memory) and comes back as a CPU tensor.
torch and CuPy are imported only when such an array is passed.
"""

import numpy as np


def _module_name(x):
    return type(x).__module__.split(".")[0]


def kind(x):
    """'torch-cuda', 'torch-cpu', 'cupy', or None for anything else (numpy,
    lists: FAISS's numpy path)."""
    module = _module_name(x)
    if module == "torch":
        return "torch-cuda" if x.is_cuda else "torch-cpu"
    if module == "cupy":
        return "cupy"
    return None


def _device_of(x, array_kind):
    return x.device.index if array_kind == "torch-cuda" else x.device.id


def _index_device(index):
    get_device = getattr(index, "getDevice", None)
    return get_device() if get_device is not None else None


def _as_device_matrix(x, array_kind, d, what):
    """x as a C-contiguous float32 (n, d) array of its own library, on its
    device (converted there when needed), or ValueError."""
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError("%s must be a 2-D array of shape (n, %d), got shape %s"
                         % (what, d, tuple(x.shape)))
    if array_kind == "torch-cuda":
        import torch
        # detached: no gradient flows through a search (and a tensor that
        # requires one has no __cuda_array_interface__)
        return x.detach().to(torch.float32).contiguous()
    import cupy
    return cupy.ascontiguousarray(x, dtype=cupy.float32)


def _synchronize_producer(x, array_kind):
    """Waits for the work that produced x on its library's current stream:
    our index runs on its own stream (StandardGpuResources)."""
    if array_kind == "torch-cuda":
        import torch
        torch.cuda.current_stream(x.device).synchronize()
    else:
        import cupy
        with cupy.cuda.Device(x.device.id):
            cupy.cuda.get_current_stream().synchronize()


def _pointer(x):
    return int(x.__cuda_array_interface__["data"][0])


def _check_device(index, x, array_kind):
    device = _index_device(index)
    if device is None:
        raise ValueError("%s is a CPU index: pass host arrays (numpy or CPU tensors), not "
                         "arrays on a GPU" % type(index).__name__)
    if _device_of(x, array_kind) != device:
        raise ValueError("the array is on GPU %d but the index is on GPU %d"
                         % (_device_of(x, array_kind), device))


def _device_output(given, like, array_kind, shape, dtype_name, what):
    """The output array `what` (D or I): `given` when it is a C-contiguous
    array of the same library on the same device with this shape and dtype,
    a new one for None."""
    if array_kind == "torch-cuda":
        import torch
        dtype = getattr(torch, dtype_name)
        if given is None:
            return torch.empty(shape, dtype=dtype, device=like.device)
        ok = (kind(given) == array_kind and given.device == like.device and given.dtype == dtype
              and tuple(given.shape) == shape and given.is_contiguous())
    else:
        import cupy
        dtype = getattr(cupy, dtype_name)
        if given is None:
            with cupy.cuda.Device(like.device.id):
                return cupy.empty(shape, dtype=dtype)
        ok = (kind(given) == array_kind and given.device == like.device and given.dtype == dtype
              and tuple(given.shape) == shape and given.flags.c_contiguous)
    if not ok:
        raise ValueError("%s must be a C-contiguous %s array of shape %s on the device of x"
                         % (what, dtype_name, shape))
    return given


def count_argument(value, what="k"):
    """An integer argument such as k: Python and numpy integers pass; a float
    (2.5 would have searched with k = 2), a bool or anything else raises
    TypeError naming it."""
    import operator
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("%s must be an integer, got the bool %r" % (what, value))
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, got %r (%s)" % (what, value, type(value).__name__)) from None


def search(index, native, x, k, params, D, I):
    """search of a torch tensor or CuPy array x (kind(x) is not None)."""
    array_kind = kind(x)
    k = count_argument(k)
    if array_kind == "torch-cpu":
        import torch
        xn = x.detach().to(torch.float32).contiguous().numpy()
        Dn = None if D is None else D.numpy()
        In = None if I is None else I.numpy()
        Dn, In = native.search(xn, k, params=params, D=Dn, I=In)
        return (D if D is not None else torch.from_numpy(Dn),
                I if I is not None else torch.from_numpy(In))
    _check_device(index, x, array_kind)
    if k <= 0:
        raise ValueError("k must be > 0, got k=%d" % k)
    x = _as_device_matrix(x, array_kind, index.d, "x")
    n = x.shape[0]
    D = _device_output(D, x, array_kind, (n, k), "float32", "D")
    I = _device_output(I, x, array_kind, (n, k), "int64", "I")
    _synchronize_producer(x, array_kind)
    native._search_pointers(n, _pointer(x), k, _pointer(D), _pointer(I), params)
    return D, I


def add(index, native, x):
    """add of a torch tensor or CuPy array x (kind(x) is not None)."""
    array_kind = kind(x)
    if array_kind == "torch-cpu":
        import torch
        native.add(x.detach().to(torch.float32).contiguous().numpy())
        return
    _check_device(index, x, array_kind)
    x = _as_device_matrix(x, array_kind, index.d, "x")
    _synchronize_producer(x, array_kind)
    native._add_pointer(x.shape[0], _pointer(x))


def host_array(x):
    """x as something numpy can read: CPU torch tensors through .numpy()."""
    if kind(x) == "torch-cpu":
        return x.detach().numpy()
    return np.asarray(x) if not hasattr(x, "__array__") else x
