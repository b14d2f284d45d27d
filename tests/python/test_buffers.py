"""Host buffers (zero copy, generations) and tensor views (numpy-style slicing)."""

import gc

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
    with pytest.raises(hg.InvalidArgument, match="C-contiguous"):
        hg.HostBuffer.wrap(np.zeros((4, 4), np.float32)[:, ::2])
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(hg.InvalidArgument, match="read-only"):
        hg.HostBuffer.wrap(ro)
    with pytest.raises(TypeError):
        hg.HostBuffer.wrap(b"bytes")


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
