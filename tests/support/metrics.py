"""A running podledger's HTTP pages: GET one, and read a Prometheus text page into samples."""

from __future__ import annotations


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """(HTTP status, body) of GET 127.0.0.1:port/path; an error status is an answer, not an exception."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


PromSamples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def prometheus_samples(text: str) -> PromSamples:
    """A Prometheus text page as the Prometheus client's parser reads it: (sample name, labels) ->
    value; fails if a series appears twice."""
    from prometheus_client.parser import text_string_to_metric_families

    out: PromSamples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in out, f"{key} twice on the page"
            out[key] = sample.value
    return out


def sample_value(samples: PromSamples, name: str, **labels: str) -> float | None:
    """The value of the one series of `name` whose labels include `labels`; None if there is none."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} series"
    return found[0] if found else None
