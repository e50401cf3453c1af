from __future__ import annotations

import datetime as dt
import io

from nfd_gpu.sinks import Publication
from nfd_gpu.sinks.hook import HookSink
from tests.sinks.nfd_local_parser import parse_feature_file


def test_hook_prints_sorted_lines_once_per_change() -> None:
    out = io.StringIO()
    sink = HookSink(out)
    labels = {"b.example.com/y": "2", "a.example.com/x": "1"}
    assert sink.publish(Publication(labels)) is True
    assert out.getvalue() == "a.example.com/x=1\nb.example.com/y=2\n"
    assert sink.publish(Publication(labels)) is False
    assert sink.publish(Publication({"a.example.com/x": "3"})) is True
    assert out.getvalue().endswith("\na.example.com/x=3\n")
    now = dt.datetime.now(dt.timezone.utc)
    assert parse_feature_file(out.getvalue().encode(), now)[0] == {
        "a.example.com/x": "3",
        "b.example.com/y": "2",
    }
