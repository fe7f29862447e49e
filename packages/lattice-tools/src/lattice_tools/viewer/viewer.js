// lattice view: draws the embedded graph model with dagre's layered layout (vendored above).
// The model is the JSON in <script id="lattice-graph">; nothing is fetched.
(function () {
  "use strict";
  const model = JSON.parse(document.getElementById("lattice-graph").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const svg = document.getElementById("canvas");
  const panel = document.getElementById("details");

  function el(name, attrs, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }

  function shortOp(node) {
    if (node.kind !== "op") return node.op;
    return node.op.replace(/^lattice\./, "");
  }

  function summary(node) {
    const a = node.attrs || {};
    const parts = [];
    const tri = (v) => (Array.isArray(v) && v.every((x) => x === v[0]) ? String(v[0]) : JSON.stringify(v));
    if (a.kernel_size !== undefined) parts.push("k" + tri(a.kernel_size));
    if (a.stride !== undefined && node.kind === "op") parts.push("s" + tri(a.stride));
    if (a.kind !== undefined) parts.push(String(a.kind));
    if (a.mode !== undefined) parts.push(String(a.mode));
    if (a.op !== undefined) parts.push(String(a.op));
    if (a.join !== undefined) parts.push(String(a.join));
    const packed = (node.weights || []).find((w) => w.packing);
    if (packed) parts.push(packed.packing.bits);
    return parts.join(" ");
  }

  const measure = el("text", { class: "label", x: -1000, y: -1000 }, svg);
  function textWidth(text, cls) {
    measure.setAttribute("class", cls);
    measure.textContent = text;
    return measure.getComputedTextLength();
  }

  const g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 34, edgesep: 12, marginx: 20, marginy: 20 });
  g.setDefaultEdgeLabel(() => ({}));
  const lines = {};
  for (const node of model.nodes) {
    const rows = [shortOp(node)];
    const extra = summary(node);
    if (extra) rows.push(extra);
    if (node.module) rows.push(node.module);
    lines[node.id] = rows;
    const width = Math.max(...rows.map((r, i) => textWidth(r, i === 0 ? "title" : "sub"))) + 24;
    g.setNode(node.id, { width: Math.max(width, 90), height: 14 + rows.length * 15 });
  }
  for (const edge of model.edges) {
    g.setEdge(edge.source, edge.target, {
      label: edge.label,
      width: textWidth(edge.label, "edge-label") + 6,
      height: 12,
      labelpos: "c",
    });
  }
  dagre.layout(g);
  svg.removeChild(measure);

  const graph = g.graph();
  const root = el("g", { id: "viewport" }, svg);
  el("defs", {}, svg).innerHTML =
    '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#7a8594"/></marker>';

  for (const e of g.edges()) {
    const info = g.edge(e);
    const d = info.points.map((p, i) => (i ? "L" : "M") + p.x.toFixed(1) + "," + p.y.toFixed(1)).join(" ");
    const group = el("g", { class: "edge" }, root);
    el("path", { d: d, "marker-end": "url(#arrow)" }, group);
    const t = el("text", { class: "edge-label", x: info.x, y: info.y + 4, "text-anchor": "middle" }, group);
    t.textContent = info.label;
  }

  const byId = Object.fromEntries(model.nodes.map((n) => [n.id, n]));
  let selected = null;
  for (const id of g.nodes()) {
    const box = g.node(id);
    const node = byId[id];
    const group = el("g", {
      class: "node " + node.kind + (node.weights && node.weights.some((w) => w.packing) ? " packed" : ""),
      "data-id": id,
      transform: `translate(${box.x - box.width / 2},${box.y - box.height / 2})`,
    }, root);
    el("rect", { width: box.width, height: box.height, rx: 6, ry: 6 }, group);
    lines[id].forEach((row, i) => {
      const t = el("text", { x: box.width / 2, y: 19 + i * 15, "text-anchor": "middle", class: i === 0 ? "title" : "sub" }, group);
      t.textContent = row;
    });
    group.addEventListener("click", (ev) => {
      ev.stopPropagation();
      if (selected) selected.classList.remove("selected");
      selected = group;
      group.classList.add("selected");
      show(node);
    });
  }

  function row(table, key, value) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = key;
    const td = document.createElement("td");
    td.textContent = typeof value === "string" ? value : JSON.stringify(value);
    tr.append(th, td);
    table.appendChild(tr);
  }

  function show(node) {
    panel.replaceChildren();
    const h = document.createElement("h2");
    h.textContent = node.op;
    panel.appendChild(h);
    if (node.module) {
      const m = document.createElement("div");
      m.className = "module";
      m.textContent = "module " + node.module;
      panel.appendChild(m);
    }
    const attrs = document.createElement("table");
    for (const [k, v] of Object.entries(node.attrs || {})) row(attrs, k, v);
    panel.appendChild(attrs);
    if (node.weights && node.weights.length) {
      const h3 = document.createElement("h3");
      h3.textContent = "weights";
      panel.appendChild(h3);
      const wt = document.createElement("table");
      for (const w of node.weights) {
        const shape = w.shape ? w.shape.join("×") : "?";
        const pack = w.packing ? ` packed ${w.packing.bits} g${w.packing.group_size}` : "";
        row(wt, w.storage_key, `${w.dtype}[${shape}] ${w.layout}${pack}`);
      }
      panel.appendChild(wt);
    }
    const io = document.createElement("table");
    for (const e of model.edges) {
      // The model's name for the value (an input's ABI name, the module that made it).
      const name = e.name || e.value;
      if (e.target === node.id) row(io, "in " + name, e.label);
      if (e.source === node.id) row(io, "out " + name, e.label);
    }
    if (io.childNodes.length) {
      const h3 = document.createElement("h3");
      h3.textContent = "values";
      panel.append(h3, io);
    }
    const f = document.createElement("div");
    f.className = "folded";
    f.textContent = "plan ops: " + node.folded.join(", ");
    panel.appendChild(f);
  }

  // Start at natural size from the top (a small graph is fitted whole); the
  // wheel zooms, dragging pans, "f" fits the whole graph.
  const box = svg.getBoundingClientRect();
  const fit = () => {
    const k = Math.max(graph.width / box.width, graph.height / box.height);
    return { x: (graph.width - box.width * k) / 2, y: 0, w: box.width * k, h: box.height * k };
  };
  let view = fit();
  if (view.w > box.width) {
    view = { x: (graph.width - box.width) / 2, y: 0, w: box.width, h: box.height };
  }
  const apply = () => svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  apply();
  window.addEventListener("keydown", (ev) => {
    if (ev.key === "f") { view = fit(); apply(); }
  });
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const k = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    const r = svg.getBoundingClientRect();
    const px = view.x + ((ev.clientX - r.left) / r.width) * view.w;
    const py = view.y + ((ev.clientY - r.top) / r.height) * view.h;
    view = { x: px - (px - view.x) * k, y: py - (py - view.y) * k, w: view.w * k, h: view.h * k };
    apply();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, v: { ...view } }; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    view.x = drag.v.x - ((ev.clientX - drag.x) / r.width) * view.w;
    view.y = drag.v.y - ((ev.clientY - drag.y) / r.height) * view.h;
    apply();
  });

  // "page.html#node=op:24" opens with that node clicked (links into a graph).
  const wanted = decodeURIComponent((location.hash.match(/node=([^&]+)/) || [])[1] || "");
  const target = wanted && root.querySelector(`g.node[data-id="${CSS.escape(wanted)}"]`);
  if (target) {
    target.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  } else {
    const first = model.nodes.find((n) => n.kind === "op") || model.nodes[0];
    if (first) show(first);
  }
  document.body.setAttribute("data-rendered-nodes", String(root.querySelectorAll("g.node").length));
  document.body.setAttribute("data-rendered-edges", String(root.querySelectorAll("g.edge").length));
})();
