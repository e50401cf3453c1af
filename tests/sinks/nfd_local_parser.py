"""NFD's ``local`` source rules (``source/local/local.go``), written for the tests.

Used to check that the feature files nfd-gpu writes read back the way nfd-worker reads
them. Checked against NFD's own test data (tests/sinks/data/nfd-local-testdata/, a copy of
``source/local/testdata/features.d`` from kubernetes-sigs/node-feature-discovery).
"""

from __future__ import annotations

import datetime as dt
import os
import stat

MAX_FEATURE_FILE_SIZE = 65536


def _parse_rfc3339(value: str) -> dt.datetime | None:
    v = value.strip()
    if not v.endswith("Z") and not (len(v) > 6 and v[-6] in "+-" and v[-3] == ":"):
        return None
    try:
        return dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_feature_file(content: bytes, now: dt.datetime) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, raw features) of one file, per parseFeatureFile/parseDirectives."""
    labels: dict[str, str] = {}
    features: dict[str, str] = {}
    expiry = now
    no_label = no_feature = False
    for raw_line in content.decode("utf-8", "replace").split("\n"):
        line = raw_line.strip()
        if not line:
            continue
        if line.startswith("#"):
            if not line.startswith("# +"):
                continue  # plain comment
            directive = line[3:]
            key, sep, value = directive.partition("=")
            if key == "expiry-time":
                if not sep:
                    raise ValueError("expiry-time directive without value")
                t = _parse_rfc3339(value)
                if t is not None:
                    expiry = t
            elif key == "no-label" and not sep:
                no_label = True
            elif key == "no-feature" and not sep:
                no_feature = True
            # any other directive: error logged, line ignored
            continue
        if expiry < now:
            no_label = no_feature = False
            continue
        k, sep, v = line.partition("=")
        value = v if sep else "true"
        if no_label:
            labels.pop(k, None)
        else:
            labels[k] = value
        if not no_feature:
            features[k] = value
        no_label = no_feature = False
    return labels, features


def parse_features_dir(directory: str, now: dt.datetime) -> tuple[dict[str, str], dict[str, str]]:
    """All files by name order; dotfiles, non-regular and oversized files skipped;
    later files override earlier ones."""
    labels: dict[str, str] = {}
    features: dict[str, str] = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("."):
            continue
        path = os.path.join(directory, name)
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FEATURE_FILE_SIZE:
            continue
        with open(path, "rb") as f:
            lab, feat = parse_feature_file(f.read(), now)
        labels.update(lab)
        features.update(feat)
    return labels, features
