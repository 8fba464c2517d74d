"""Checking that a call raises what DGL alone raises."""
import re

import pytest

import dgl_ugraph


def message(exc) -> str:
    """An exception's text without the time of day that starts DGL's C++ messages, so that the
    same error raised a second later reads the same."""
    return re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", str(exc))


def same_error(call):
    """call() raises the same exception type and first line with dgl_ugraph on as DGL alone;
    returns DGL's exception."""
    with pytest.raises(Exception) as ours:
        call()
    with dgl_ugraph.disabled():
        with pytest.raises(Exception) as theirs:
            call()
    assert ours.type is theirs.type, (ours.value, theirs.value)
    first = [message(e.value).splitlines()[0] for e in (ours, theirs)]
    assert first[0] == first[1]
    return theirs.value
