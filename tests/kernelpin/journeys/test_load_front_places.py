"""Issue 50, one load front: following `get_kernel("acme/img2gray", version=0)` through the front visits at most 25
places in at most 8 rooms (tests/kernelpin/journeys/places.py says what a place is). Measured on the code before
the front (the lockless load in the module loading.get_kernel, the front then): 44 places in 7 rooms on a cold
call, 33 in a new process with the cache warm."""

from __future__ import annotations

import sys
import warnings

import pytest

from kernelpin import get_kernel
from tests.kernelpin.front.test_get_kernel import fresh_modules, state  # noqa: F401 (fixtures)
from tests.kernelpin.journeys.places import rooms, visited

# The modules that route a load: the entry points and resolvers of kernelpin.front, and loading's one front.
FRONT = ("front", "loading.front")


def _forget_kernels() -> None:
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


@pytest.mark.parametrize("call", ["cold", "warm cache, new process"])
def test_get_kernel_visits_at_most_25_places_in_8_rooms(img2gray, state, hf_env, fresh_modules, call) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unpinned warning: test_get_kernel checks it
        if call != "cold":
            get_kernel(img2gray, version=0)
            _forget_kernels()
        places = visited(lambda: get_kernel(img2gray, version=0), FRONT)
    assert ("loading.importing", "import_pinned") in places  # it was followed to the import
    assert len(places) <= 25 and len(rooms(places)) <= 8, sorted(places)
