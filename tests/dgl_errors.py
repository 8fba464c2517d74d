"""Checking that a call raises what DGL alone raises."""
import re

import pytest

import dgl_ugraph


def same_error(call):
    """call() raises the same exception type and first line with dgl_ugraph on as DGL alone;
    returns DGL's exception."""
    with pytest.raises(Exception) as ours:
        call()
    with dgl_ugraph.disabled():
        with pytest.raises(Exception) as theirs:
            call()
    assert ours.type is theirs.type, (ours.value, theirs.value)
    first = [re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", str(e.value).splitlines()[0]) for e in (ours, theirs)]
    assert first[0] == first[1]  # DGL's C++ messages start with the time of day
    return theirs.value
