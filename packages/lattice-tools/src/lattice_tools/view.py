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
from lattice_contract.artifact import EXIT_OK, EXIT_USAGE, BundleError
from lattice_contract.plan import ArtifactCapabilityError

from lattice_tools.artifact_source import open_artifact_source
from lattice_tools.graph_model import GraphModel, load_graph_model

log = logging.getLogger(__name__)

__all__ = ["main", "render_html", "write_html"]


def _asset(name: str) -> str:
    return (resources.files("lattice_tools") / "viewer" / name).read_text(encoding="utf-8")


def _inline_script(text: str) -> str:
    """Script text that cannot close its own ``<script>`` element early."""
    return text.replace("</", "<\\/")


def render_html(model: GraphModel, title: str) -> str:
    """The page for ``model`` (a complete HTML document)."""
    data = json.dumps(model.as_dict(), sort_keys=True)
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
<script id="lattice-graph" type="application/json">{_inline_script(data)}</script>
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
    with open_artifact_source(artifact) as source:
        model = load_graph_model(str(source.artifact_dir))
    page = render_html(model, Path(artifact).name)
    target = Path(out)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(target)  # a reader never sees half a page
    finally:
        tmp.unlink(missing_ok=True)  # nothing half-written is left behind either
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
    except (BundleError, FixtureArchiveError, ArtifactCapabilityError, ValueError, OSError) as exc:
        log.error("lattice view: %s", exc)
        return EXIT_USAGE
    ops = sum(n.kind == "op" for n in model.nodes)
    log.info("lattice view: %d ops, %d edges -> %s", ops, len(model.edges), args.html)
    return EXIT_OK
