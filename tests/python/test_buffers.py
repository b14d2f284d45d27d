"""Host buffers (zero copy, generations) and tensor views (numpy-style slicing)."""

import array
import gc
import mmap

import numpy as np
import pytest

import hostgraph as hg


def test_wrap_is_zero_copy():
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)
    buf = hg.HostBuffer.wrap(arr)
    assert buf.data_ptr == arr.ctypes.data
    assert buf.nbytes == arr.nbytes
    assert buf.array is arr
    view = buf.tensor().numpy()
    assert np.shares_memory(view, arr)
    arr[1, 2] = 99.0
    assert view[1, 2] == 99.0


def test_wrap_keeps_the_array_alive():
    buf = hg.HostBuffer.wrap(np.full(1000, 7, np.int32))
    gc.collect()
    assert buf.array.sum() == 7000
    assert buf.data_ptr == buf.array.ctypes.data


def test_wrap_refuses_what_it_cannot_register():
    with pytest.raises(hg.InvalidArgument, match="C-contiguous.*ascontiguousarray"):
        hg.HostBuffer.wrap(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="buffer protocol"):
        hg.HostBuffer.wrap([1, 2, 3])


def test_wrapping_memory_a_live_buffer_holds_is_refused():
    """The same memory under two buffers went stale: a write declared through
    one left the other's resident copy "fresh".  The second wrap is refused."""
    arr = np.zeros(4096, np.float32)
    buf = hg.HostBuffer.wrap(arr)
    for part in (arr[:1024], arr[1000:2000], arr[-1:], arr.reshape(64, 64)[3]):
        with pytest.raises(hg.InvalidArgument, match=f"host buffer {buf.id} ") as e:
            hg.HostBuffer.wrap(part)
        assert "tensor view" in str(e.value) and "HostBuffer.wrap" in str(e.value)
    view = buf.tensor()[:1024]  # what to do instead
    assert np.shares_memory(view.numpy(), arr)
    created = hg.HostBuffer(64)
    with pytest.raises(hg.InvalidArgument, match=f"host buffer {created.id} "):
        hg.HostBuffer.wrap(created.numpy("f32"))
    assert hg.HostBuffer.wrap(np.zeros(0, np.float32)).nbytes == 0  # empty overlaps nothing
    buf.close()
    again = hg.HostBuffer.wrap(arr[:1024])  # closed: the memory is free again
    assert again.data_ptr == arr.ctypes.data
    again.close()


def test_read_only_memory_wraps_without_a_copy_and_is_only_read(tmp_path):
    np.save(tmp_path / "w.npy", np.arange(4096, dtype=np.float32))
    w = np.load(tmp_path / "w.npy", mmap_mode="r")  # weights: no copy wanted
    buf = hg.HostBuffer.wrap(w)
    assert buf.readonly and buf.data_ptr == w.ctypes.data and buf.array is w
    assert not buf.numpy().flags.writeable and not buf.tensor().numpy().flags.writeable
    for d in (hg.OUT, hg.INOUT):
        with pytest.raises(hg.InvalidArgument, match=f"arg 'w': a {d.name} arg.*read-only.*IN"):
            hg.Arg("w", d, buf.tensor())
    with pytest.raises(hg.InvalidArgument, match="read-only"):
        buf.write(0, b"x")
    c = np.zeros(4096, np.float32)
    with hg.Device("sim:cores=2") as dev, hg.Runner(dev) as r, \
            hg.SceneCase("vector_add", {"n": 4096, "tile": 512}) as case:
        args = [hg.Arg("a", hg.IN, buf.tensor(), resident=True), hg.Arg("b", hg.IN, buf.tensor()),
                hg.Arg("c", hg.OUT, hg.HostBuffer.wrap(c).tensor()), hg.scalar("tile", 512)]
        r.run(case.callable, args)
    np.testing.assert_array_equal(c, 2 * np.asarray(w))


def test_resident_out_is_refused():
    buf = hg.HostBuffer.wrap(np.zeros(4, np.float32))
    with pytest.raises(hg.InvalidArgument, match="arg 'y': resident=True on an OUT arg.*INOUT"):
        hg.Arg("y", hg.OUT, buf.tensor(), resident=True)
    y = hg.Arg("y", "out", buf.tensor())
    with pytest.raises(hg.InvalidArgument, match="arg 'y'"):
        y.with_residency(True)
    assert hg.Arg("y", hg.INOUT, buf.tensor(), resident=True).resident


class _Interface:
    """Memory offered through __array_interface__ only (no buffer protocol)."""

    def __init__(self, n):
        self._arr = np.zeros(n, np.uint8)
        self.__array_interface__ = self._arr.__array_interface__


@pytest.mark.parametrize("make", [
    lambda: bytearray(64),
    lambda: memoryview(bytearray(64)),
    lambda: array.array("f", [0.0] * 16),
    lambda: mmap.mmap(-1, 64),
    lambda: _Interface(64),
], ids=["bytearray", "memoryview", "array.array", "mmap", "__array_interface__"])
def test_wrap_takes_any_buffer(make):
    obj = make()
    buf = hg.HostBuffer.wrap(obj)
    assert buf.nbytes == 64 and not buf.readonly
    buf.write(8, b"\x05\x06")
    assert bytes(np.asarray(buf.numpy()[8:10])) == b"\x05\x06"
    seen = obj._arr if isinstance(obj, _Interface) else memoryview(obj).cast("B")
    assert bytes(seen[8:10]) == b"\x05\x06"  # in the object's own memory: no copy
    buf.close()


def test_wrap_takes_read_only_buffers():
    buf = hg.HostBuffer.wrap(b"\x01" * 32)
    assert buf.readonly and buf.nbytes == 32
    with pytest.raises(hg.InvalidArgument, match="arg 'x'"):
        hg.Arg("x", hg.INOUT, buf.tensor("u8"))


def test_every_write_through_the_api_moves_the_generation_on():
    arr = np.zeros(64, np.uint8)
    buf = hg.HostBuffer.wrap(arr)
    g = buf.generation
    buf.write(8, b"\x01\x02\x03")
    assert buf.generation == g + 1
    assert buf.last_write == (8, 11)
    assert list(arr[8:11]) == [1, 2, 3]  # written into the array itself
    arr[20:30] = 5  # in place: the generation does not know ...
    assert buf.generation == g + 1
    buf.mark_written(20, 30)  # ... until it is told
    assert buf.generation == g + 2
    assert buf.last_write == (20, 30)
    buf.mark_written()
    assert buf.last_write == (0, 64)
    assert buf.generation == g + 3


def test_ids_are_never_reused():
    ids = set()
    for _ in range(5):
        with hg.HostBuffer(16) as b:
            ids.add(b.id)
    assert len(ids) == 5


def test_writes_outside_the_buffer_raise_range_error():
    buf = hg.HostBuffer(16)
    g = buf.generation
    with pytest.raises(hg.RangeError, match="16"):
        buf.write(10, b"x" * 10)
    with pytest.raises(hg.RangeError):
        buf.mark_written(0, 17)
    assert buf.generation == g  # a refused write moves nothing


def test_created_buffer_is_zeroed_and_viewable():
    with hg.HostBuffer(32) as buf:
        assert not buf.numpy().any()
        buf.write(0, np.array([1.5, 2.5], np.float64))
        assert list(buf.numpy("f64")[:2]) == [1.5, 2.5]
    assert buf.closed


KEYS = [
    (slice(None),),
    (1,),
    (slice(1, 3), slice(None), slice(2, 5)),
    (slice(None, None, 2), 0),
    (Ellipsis, slice(1, None, 3)),
    (-1, slice(None), -2),
    (slice(0, 0),),
    (slice(1, 3), Ellipsis),
    (slice(5, 1),),
]


@pytest.mark.parametrize("key", KEYS)
def test_views_slice_like_numpy(key):
    arr = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    t = hg.HostBuffer.wrap(arr).tensor()
    view = t[key]
    want = arr[key]
    got = view.numpy()
    assert got.shape == (want.shape or (1,))
    assert np.array_equal(got, np.reshape(want, got.shape))
    if want.size:
        assert np.shares_memory(got, arr)
        lo, hi = view.extent
        assert lo == view.offset * 4 and hi > lo


def test_full_integer_index_is_one_element():
    arr = np.arange(12, dtype=np.int64).reshape(3, 4)
    v = hg.HostBuffer.wrap(arr).tensor()[2, 3]
    assert v.shape == (1,) and v.offset == 11 and v.numpy()[0] == 11


def test_views_that_numpy_has_but_hostgraph_does_not():
    t = hg.HostBuffer.wrap(np.zeros((4, 4), np.float32)).tensor()
    with pytest.raises(IndexError, match="negative step"):
        t[::-1]
    with pytest.raises(IndexError):
        t[4]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[None]


def test_tensor_errors_carry_their_codes():
    buf = hg.HostBuffer(64)
    with pytest.raises(hg.RangeError):
        hg.Tensor(buf, "f32", (17,))
    with pytest.raises(hg.LimitError):
        hg.Tensor(buf, "u8", (1, 1, 1, 1, 1, 1))
    with pytest.raises(hg.SizeOverflowError):
        hg.Tensor(buf, "f64", (1 << 62, 1 << 62))
    with pytest.raises(hg.RangeError):
        hg.Tensor(buf, "f32", (4, 4)).slice(0, 2, 3)
    with pytest.raises(ValueError, match="bf16"):
        hg.HostBuffer.wrap(np.zeros(4, np.uint16)).tensor()
    with pytest.raises(ValueError):
        hg.Tensor(buf, "f128", (1,))


def test_slice_method_is_hg_tensor_slice():
    arr = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = hg.HostBuffer.wrap(arr).tensor()
    s = t.slice(1, 1, 3)
    assert s.shape == (4, 3) and s.strides == (5, 1) and s.offset == 1
    assert np.array_equal(s.numpy(), arr[:, 1:4])
    assert not s.is_dense and t.is_dense and s.overlaps(t)


def test_bf16_lives_in_uint16():
    arr = np.zeros(8, np.uint16)
    t = hg.HostBuffer.wrap(arr).tensor("bf16")
    assert t.dtype == "bf16" and t.numpy().dtype == np.uint16


def test_host_memory_error():
    with pytest.raises(hg.HostMemoryError):
        hg.HostBuffer(1 << 62)
