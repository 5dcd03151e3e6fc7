import subprocess
import sys

import pytest

from rlightning.types import BatchedData


def test_order_and_duplicates_kept():
    b = BatchedData(["a", "b", "a"], [1, 2, 3])
    assert b.ids() == ("a", "b", "a")
    assert b.values() == (1, 2, 3)
    assert list(b.items()) == [("a", 1), ("b", 2), ("a", 3)]
    assert len(b) == 3
    assert not b.is_future


def test_from_dict_keeps_insertion_order():
    b = BatchedData.from_dict({"x": 1, "y": 2})
    assert b.ids() == ("x", "y") and b.values() == (1, 2)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="one id per element: got 2 ids and 1 elements"):
        BatchedData(["a", "b"], [1])


def test_from_dict_rejects_non_dict():
    with pytest.raises(TypeError, match="expects a dict"):
        BatchedData.from_dict([("a", 1)])


def test_concatenation():
    b = BatchedData(["a"], [1]) + BatchedData(["b"], [2])
    assert b.ids() == ("a", "b")


def test_is_future_without_ray_imported():
    code = (
        "import sys; from rlightning.types import BatchedData; "
        "b = BatchedData(['a'], [object()]); "
        "assert not b.is_future; assert 'ray' not in sys.modules; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


@pytest.mark.ray
def test_is_future_detects_object_refs(ray_runtime):
    ref = ray_runtime.put(5)
    b = BatchedData(["a", "b"], [1, ref])
    assert b.is_future
    assert not BatchedData(["a"], [1]).is_future
