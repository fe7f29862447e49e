"""``lattice view ARTIFACT --html out.html``: one self-contained page drawing the graph.

The page holds everything it needs inline -- the folded graph model
(:mod:`lattice_tools.graph_model`) as JSON, the vendored dagre layout
library (``viewer/dagre.min.js``, MIT, see ``viewer/dagre.LICENSE.txt``), the
drawing script and its style -- so it opens from disk, from a mail
attachment or from a CI artefact, with no network and no server.  Ops are
nodes (their weights, and the decompose/with_features wrappers, folded in;
module names from the storage keys), edges carry each value's shape and
stride, and clicking a node shows its attributes, weights and values.

ARTIFACT is a ``model.lattice`` directory or a fixture archive.
"""

from __future__ import annotations

import argparse
import html
import json
import logging
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from lattice_conformance.archive import FixtureArchiveError
from lattice_contract.artifact import (
    EXIT_OK,
    EXIT_USAGE,
    BundleError,
    OutputClashError,
    WriterLockedError,
    atomic_write_file,
    check_outputs,
)
from lattice_contract.plan import ArtifactCapabilityError

from lattice_tools.artifact_source import open_artifact_source
from lattice_tools.graph_model import GraphModel, load_graph_model

log = logging.getLogger(__name__)

__all__ = ["json_for_html", "main", "render_html", "write_html"]


def _asset(name: str) -> str:
    return (resources.files("lattice_tools") / "viewer" / name).read_text(encoding="utf-8")


def _inline_script(text: str) -> str:
    """Script text that cannot close its own ``<script>`` element early."""
    return text.replace("</", "<\\/")


_JSON_IN_HTML = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def json_for_html(value: object) -> str:
    """JSON that means the same inside a ``<script>`` element as in a ``.json`` file.

    Inside a script element the HTML parser, not the JSON parser, decides
    where the data ends: ``</script>`` closes it, and ``<!--<script>`` makes
    the parser swallow everything up to a second ``</script>`` (the page
    never draws).  Every ``<``, ``>`` and ``&`` is written as a ``\\u``
    escape, which the JSON parser reads back as the same character, so no
    weight key or output name can end the element or change how it is parsed.
    """
    return json.dumps(value, sort_keys=True).translate(_JSON_IN_HTML)


def render_html(model: GraphModel, title: str) -> str:
    """The page for ``model`` (a complete HTML document)."""
    data = json_for_html(model.as_dict())
    ops = sum(n.kind == "op" for n in model.nodes)
    name = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{name} - lattice view</title>
<style>
{_asset("viewer.css")}
</style>
</head>
<body>
<header><h1>{name}</h1><span>{ops} ops drawn for {model.plan_ops} plan ops
(weights and decompose/with_features folded in) &middot; click a node for its attributes
&middot; wheel to zoom, drag to pan</span></header>
<main><svg id="canvas" xmlns="http://www.w3.org/2000/svg"></svg><aside id="details"></aside></main>
<script id="lattice-graph" type="application/json">{data}</script>
<script>
/* dagre {"(@dagrejs/dagre 3.1.3, MIT licence: Copyright (c) 2012-2014 Chris Pettitt)"} */
{_inline_script(_asset("dagre.min.js"))}
</script>
<script>
{_inline_script(_asset("viewer.js"))}
</script>
</body>
</html>
"""


def write_html(artifact: str | os.PathLike[str], out: str | os.PathLike[str]) -> GraphModel:
    """Read ``artifact`` (bundle or fixture archive) and write its page to ``out``."""
    check_outputs([out], [artifact])
    with open_artifact_source(artifact) as source:
        model = load_graph_model(str(source.artifact_dir))
    page = render_html(model, Path(artifact).name)
    # The project's atomic writer: a private temporary name under the writer lock (a
    # fixed name could be a planted link, and two views of one page raced on it), and
    # never over the artifact the page is drawn from.
    atomic_write_file(
        Path(out), lambda tmp: tmp.write_text(page, encoding="utf-8"), inputs=[artifact]
    )
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice view``."""
    parser = argparse.ArgumentParser(
        prog="lattice view",
        description="Write a self-contained HTML page drawing an artifact's graph.",
    )
    parser.add_argument("artifact", help="model.lattice directory or fixture archive (.tar.gz)")
    parser.add_argument("--html", required=True, metavar="OUT", help="page to write")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        model = write_html(args.artifact, args.html)
    except (
        BundleError,
        FixtureArchiveError,
        ArtifactCapabilityError,
        OutputClashError,
        WriterLockedError,
        ValueError,
        OSError,
    ) as exc:
        log.error("lattice view: %s", exc)
        return EXIT_USAGE
    ops = sum(n.kind == "op" for n in model.nodes)
    log.info("lattice view: %d ops, %d edges -> %s", ops, len(model.edges), args.html)
    return EXIT_OK
