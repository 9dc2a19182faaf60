"""Decoding one static pod manifest: the bytes of a manifest file or URL body -> plain data -> the
defaulted pods, or a ManifestError with a one-line reason.

JSON is read as JSON; anything else goes through PyYAML's safe loader cut down to what JSON holds,
with nesting depth and alias expansion bounded before anything is built, so neither a deep document
nor an alias bomb costs more than the manifest size limit allows. No I/O: the same bytes always give
the same answer. What a decoded manifest means is decided by the pure agents/sources/manifests.py;
the sources that read the bytes are agents/sources/file_source.py and agents/sources/http_source.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from podledger.agents.sources.manifests import MAX_DEPTH, MAX_MANIFEST_BYTES, ManifestError, static_pods
from podledger.types import JSONDict

__all__ = ["decode_manifest", "expanded_size", "one_line", "parse_manifest"]

_CORE = "tag:yaml.org,2002:"


def one_line(exc: object, limit: int = 300) -> str:
    """An error's text on one line, cut to `limit` characters (reasons go to logs and reports)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """A YAML error in one line, with the line and column where it was found."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        text = ", ".join(str(part) for part in (exc.context, exc.problem) if part)
        text = one_line(text) + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    else:
        text = one_line(exc)
    return text if isinstance(exc, ConstructorError) else f"not valid YAML: {text}"


def _refuse_tag(loader: SafeConstructor, node: yaml.Node) -> Any:
    tag = node.tag.replace(_CORE, "!!")
    raise ConstructorError(
        None,
        None,
        f"tag {tag} is not allowed in a manifest (only maps, lists, strings, numbers, booleans and null)",
        node.start_mark,
    )


# libyaml when present: the pure-Python parser is about ten times slower.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _ManifestLoader(_SafeLoader):
    """PyYAML's safe loader cut down to what JSON holds: maps, lists, strings, numbers, booleans and
    null. Other tags (!!set, !!binary, !!omap, !!python/..., local ones) are refused; timestamps and the
    `=` value key stay strings, as the kubelet's YAML-to-JSON conversion leaves them."""

    yaml_constructors: ClassVar[dict[Any, Any]] = {}


for _tag in ("null", "bool", "int", "float", "str", "seq", "map"):
    _ManifestLoader.add_constructor(_CORE + _tag, SafeConstructor.yaml_constructors[_CORE + _tag])
for _tag in ("timestamp", "value"):
    _ManifestLoader.add_constructor(_CORE + _tag, SafeConstructor.construct_yaml_str)
_ManifestLoader.add_constructor(None, _refuse_tag)


def _check_depth(data: bytes) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the parser's events alone, before anything recursive
    (libyaml's composer would overflow the C stack on a deep enough document)."""
    loader = _SafeLoader(data)
    try:
        depth = 0
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def expanded_size(root: yaml.Node, limit: int = MAX_MANIFEST_BYTES) -> int:
    """The size of a composed YAML document with every alias expanded (a byte per node plus the scalars'
    text), refused above `limit`: an alias bomb is caught before anything is built from it. Shared
    nodes are measured once, so this costs one pass over the document as written."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in open_nodes:
            raise ManifestError("an alias refers to a node that contains it")
        if depth > MAX_DEPTH:
            raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            total = 1 + len(node.value)
        else:
            open_nodes.add(key)
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            else:  # a mapping: (key, value) pairs
                children = [part for pair in node.value for part in pair]
            total = 1 + sum(size(child, depth + 1) for child in children)
            open_nodes.discard(key)
        if total > limit:
            raise ManifestError(
                f"the manifest holds more than {limit} bytes with its aliases expanded"
                " (a YAML alias bomb, or simply too large)"
            )
        sizes[key] = total
        return total

    return size(root, 0)


def decode_manifest(data: bytes, limit: int = MAX_MANIFEST_BYTES) -> Any:
    """The one JSON or YAML document in `data` as plain data, or a ManifestError: larger than `limit`,
    not valid YAML, several documents, tags outside the JSON core, aliases expanding beyond `limit`."""
    if len(data) > limit:
        raise ManifestError(f"the manifest is {len(data)} bytes, more than {limit}")
    if not data.strip():
        raise ManifestError("the manifest is empty")
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # YAML flow style, or broken JSON: the YAML parser says why
    try:
        _check_depth(data)
    except yaml.YAMLError as exc:
        raise ManifestError(_yaml_reason(exc)) from None
    loader = _ManifestLoader(data)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ManifestError("the manifest is empty")
        expanded_size(node, limit)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ManifestError(_yaml_reason(exc)) from None
    except RecursionError:
        raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def parse_manifest(data: bytes, *, node: str, source: str, path_or_url: str) -> list[JSONDict]:
    """Bytes of a manifest file (one Pod) or URL body (a Pod or a PodList) -> the defaulted pods, or a
    ManifestError with a one-line reason. No I/O: the same bytes always give the same answer."""
    return static_pods(decode_manifest(data), node=node, source=source, path_or_url=path_or_url)
