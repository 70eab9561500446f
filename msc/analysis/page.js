// The viewer of msc's HTML page (msc/analysis/page.py): layout, drawing, inspection, search.
// Layout: every module call is a box laid out on its own, top-down (layers by longest path,
// crossings reduced by barycentres, x by isotonic regression towards neighbours), then placed
// as one item of its parent's layout; collapsing a box lays out the levels above it again.
// Strings from the model are only ever set as text (textContent / text nodes).
"use strict";
window.__mscErrors = [];
window.addEventListener("error", function (e) { window.__mscErrors.push(String(e.message)); });

(function () {
  const DATA = JSON.parse(document.getElementById("msc-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const PAD = 10, HEAD = 18, RANKSEP = 26, NODESEP = 14, DUMMYW = 6, BUDGET = 40;
  const SEVERITY = ["same", "ok", "changed", "diverged", "added", "removed", "first divergence"];
  const svg = document.getElementById("canvas");
  const vp = document.getElementById("vp");
  const panel = document.getElementById("panel");
  const measure = document.createElement("canvas").getContext("2d");
  let G = null;  // the graph shown, with its derived tables and view state
  let view = { k: 1, tx: 0, ty: 0 };

  function textWidth(s, size, bold) {
    measure.font = (bold ? "bold " : "") + size + "px Helvetica, Arial, sans-serif";
    return measure.measureText(s).width;
  }
  function cut(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function htmlEl(tag, text, parent, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  }

  // ------------------------------------------------------------------ derived tables
  function prepare(g) {
    const chain = g.nodes.map(function (_, n) {
      const c = [];
      for (let x = g.owner[n]; x >= 0; x = g.groups[x].parent) c.unshift(x);
      return c;
    });
    const inside = g.groups.map(function () { return []; });
    chain.forEach(function (c, n) { c.forEach(function (x) { inside[x].push(n); }); });
    const lca = new Map();  // level (group id, -1 the graph) -> [itemA, itemB, source, target]
    const entries = new Map(), exits = new Map();  // group -> its items read from / read outside
    function addTo(m, x, key) { if (!m.has(x)) m.set(x, new Set()); m.get(x).add(key); }
    g.edges.forEach(function (e) {
      const a = chain[e[0]], b = chain[e[1]];
      let c = 0;
      while (c < a.length && c < b.length && a[c] === b[c]) c++;
      const level = c === 0 ? -1 : a[c - 1];
      const ia = a.length > c ? "g" + a[c] : "n" + e[0];
      const ib = b.length > c ? "g" + b[c] : "n" + e[1];
      if (!lca.has(level)) lca.set(level, []);
      lca.get(level).push([ia, ib, e[0], e[1]]);
      // The edge leaves every group of the source below the common level, and enters every
      // group of the target: each of those levels routes it from its item to its border.
      for (let k = c; k < a.length; k++) addTo(exits, a[k], a.length > k + 1 ? "g" + a[k + 1] : "n" + e[0]);
      for (let k = c; k < b.length; k++) addTo(entries, b[k], b.length > k + 1 ? "g" + b[k + 1] : "n" + e[1]);
    });
    const collapsed = new Set();
    if (g.collapsed) {
      g.groups.forEach(function (_, i) { collapsed.add(i); });
      // Open whole levels of the module tree while the boxes shown stay within the budget,
      // so that like modules (the layers of an encoder) look alike.
      let visible = g.root.length;
      let level = g.root.filter(function (it) { return it[0] === "g"; }).map(function (it) { return it[1]; });
      while (level.length) {
        const more = level.reduce(function (s, x) { return s + g.groups[x].items.length - 1; }, 0);
        if (visible + more > BUDGET) break;
        visible += more;
        const next = [];
        level.forEach(function (x) {
          collapsed.delete(x);
          g.groups[x].items.forEach(function (it) { if (it[0] === "g") next.push(it[1]); });
        });
        level = next;
      }
    }
    return { g: g, chain: chain, inside: inside, lca: lca, entries: entries, exits: exits,
             collapsed: collapsed, sel: null,
             hits: [], hitPos: -1, layout: null, abs: null };
  }

  function rep(n) {
    const c = G.chain[n];
    for (let i = 0; i < c.length; i++) if (G.collapsed.has(c[i])) return "g" + c[i];
    return "n" + n;
  }
  function worst(nodes) {
    let best = null;
    nodes.forEach(function (n) {
      const ov = G.g.nodes[n].ov;
      if (ov && (best === null || SEVERITY.indexOf(ov[0]) > SEVERITY.indexOf(best))) best = ov[0];
    });
    return best;
  }

  // ------------------------------------------------------------------ sizes and labels
  function nodeLines(n) {
    const d = G.g.nodes[n];
    if (d.k === "input" || d.k === "output") return [[d.name, true], [d.outs[0][1], false]];
    const lines = [[d.op, true]];
    if (d.name && d.name !== d.op) lines.push([cut(d.name, 34), false]);
    else if (d.module) lines.push([cut(d.module, 34), false]);
    if (d.outs.length) lines.push([cut(d.outs[0][1], 34) + (d.outs.length > 1 ? " +" + (d.outs.length - 1) : ""), false]);
    return lines;
  }
  function groupLines(x) {
    const ops = {};
    G.inside[x].forEach(function (n) { const op = G.g.nodes[n].op; ops[op] = (ops[op] || 0) + 1; });
    const top = Object.keys(ops).sort(function (a, b) { return ops[b] - ops[a]; }).slice(0, 3);
    return [[cut(G.g.groups[x].label, 34), true], [G.inside[x].length + " nodes", false],
            [cut(top.map(function (o) { return o + (ops[o] > 1 ? "\u00d7" + ops[o] : ""); }).join(", "), 40), false]];
  }
  function linesSize(lines) {
    let w = 60;
    lines.forEach(function (l, i) { w = Math.max(w, textWidth(l[0], i === 0 ? 12 : 10, l[1]) + 16); });
    return { w: Math.ceil(w), h: 8 + lines.length * 13 };
  }

  // ------------------------------------------------------------------ layout
  function isotonic(u) {  // non-decreasing least-squares fit of u (pool adjacent violators)
    const blocks = [];
    u.forEach(function (v) {
      blocks.push({ s: v, c: 1 });
      while (blocks.length > 1) {
        const a = blocks[blocks.length - 2], b = blocks[blocks.length - 1];
        if (a.s / a.c <= b.s / b.c) break;
        a.s += b.s; a.c += b.c; blocks.pop();
      }
    });
    const out = [];
    blocks.forEach(function (b) { for (let i = 0; i < b.c; i++) out.push(b.s / b.c); });
    return out;
  }

  function layoutLevel(level) {
    const items = level < 0 ? G.g.root : G.g.groups[level].items;
    const el = [];  // layout elements: items and dummies
    const byKey = new Map();
    items.forEach(function (it, i) {
      const key = it[0] + it[1];
      const e = { key: key, order: i, preds: [], succs: [], dummy: false, sub: null, item: it };
      if (it[0] === "n") {
        Object.assign(e, linesSize(nodeLines(it[1])));
      } else if (G.collapsed.has(it[1])) {
        const s = linesSize(groupLines(it[1]));
        e.w = s.w + 4; e.h = s.h + 4;
      } else {
        e.sub = layoutLevel(it[1]);
        e.w = Math.max(e.sub.w + 2 * PAD, textWidth(G.g.groups[it[1]].label, 11, true) + 30);
        e.h = e.sub.h + HEAD + PAD;
      }
      el.push(e); byKey.set(key, e);
    });
    const pairs = new Map();
    (G.lca.get(level) || []).forEach(function (p) {
      const k = p[0] + "|" + p[1];
      if (!pairs.has(k)) pairs.set(k, [byKey.get(p[0]), byKey.get(p[1])]);
    });
    // A group's border: IN above everything (edges from outside come through it), OUT below.
    if (level >= 0 && (G.entries.has(level) || G.exits.has(level))) {
      const IN = { key: "IN", order: -1, preds: [], succs: [], dummy: true, w: 0, h: 0 };
      const OUT = { key: "OUT", order: items.length, preds: [], succs: [], dummy: true, w: 0, h: 0 };
      el.unshift(IN); el.push(OUT);
      (G.entries.get(level) || new Set()).forEach(function (k) { pairs.set("IN|" + k, [IN, byKey.get(k)]); });
      (G.exits.get(level) || new Set()).forEach(function (k) { pairs.set(k + "|OUT", [byKey.get(k), OUT]); });
    }
    pairs.forEach(function (p) { p[0].succs.push(p[1]); p[1].preds.push(p[0]); });
    // Ranks: longest path from the top (items come in execution order); a source that reads
    // nothing (a constant) sits just above its first use instead of at the top.
    el.forEach(function (e) {
      e.rank = 0;
      e.preds.forEach(function (p) { e.rank = Math.max(e.rank, p.rank + 1); });
    });
    for (let i = el.length - 1; i >= 0; i--) {
      const e = el[i], it = e.item;
      if (!it || e.preds.length || !e.succs.length) continue;
      if (it[0] === "n" && G.g.nodes[it[1]].k === "input") continue;
      e.rank = Math.max(0, Math.min.apply(null, e.succs.map(function (s) { return s.rank; })) - 1);
    }
    const outEl = el.find(function (e) { return e.key === "OUT"; });
    if (outEl) {
      outEl.rank = 1 + el.reduce(function (m, e) { return e === outEl ? m : Math.max(m, e.rank); }, 0);
    }
    // Long edges become chains of dummies, so they take part in ordering and get a route.
    const routes = new Map();
    pairs.forEach(function (p, k) {
      let a = p[0];
      const chainD = [];
      for (let r = p[0].rank + 1; r < p[1].rank; r++) {
        const d = { key: "d" + el.length, order: a.order, preds: [a], succs: [], dummy: true, w: DUMMYW, h: 0, rank: r };
        a.succs.push(d); el.push(d); chainD.push(d); a = d;
      }
      if (chainD.length) {
        const i = p[0].succs.indexOf(p[1]); if (i >= 0) p[0].succs.splice(i, 1);
        const j = p[1].preds.indexOf(p[0]); if (j >= 0) p[1].preds.splice(j, 1);
        a.succs.push(p[1]); p[1].preds.push(a);
      }
      routes.set(k, chainD);
    });
    const nr = el.reduce(function (m, e) { return Math.max(m, e.rank + 1); }, 0);
    const layers = [];
    for (let r = 0; r < nr; r++) layers.push([]);
    el.forEach(function (e) { layers[e.rank].push(e); });
    layers.forEach(function (L) {
      L.sort(function (a, b) { return a.order - b.order; });
      L.forEach(function (e, i) { e.pos = i; });
    });
    function sweep(down) {
      const seq = down ? layers.slice(1) : layers.slice(0, -1).reverse();
      seq.forEach(function (L) {
        L.forEach(function (e) {
          const nb = down ? e.preds : e.succs;
          e.bc = nb.length ? nb.reduce(function (s, x) { return s + x.pos; }, 0) / nb.length : e.pos;
          if (e.dummy) e.bc += 0.5;  // long edges pass to the right of the boxes they skip
        });
        L.sort(function (a, b) { return a.bc - b.bc || a.pos - b.pos; });
        L.forEach(function (e, i) { e.pos = i; });
      });
    }
    for (let i = 0; i < 4; i++) { sweep(true); sweep(false); }
    // x: pack, then pull each node towards its neighbours' centres, keeping order and gaps.
    layers.forEach(function (L) {
      let x = 0;
      L.forEach(function (e) { e.x = x; x += e.w + NODESEP; });
    });
    function align(down) {
      const seq = down ? layers.slice(1) : layers.slice(0, -1).reverse();
      seq.forEach(function (L) {
        let off = 0;
        const u = L.map(function (e) {
          const nb = down ? e.preds : e.succs;
          // A box follows the boxes it is wired to more than the long edges passing by (which
          // keeps chains of modules straight); a long edge's dummies follow each other.
          const same = nb.filter(function (x) { return x.dummy === e.dummy; });
          let sw = 0, sx = 0;
          (same.length ? same : nb).forEach(function (x) { sw += 1; sx += x.x + x.w / 2; });
          const c = sw ? sx / sw : e.x + e.w / 2;
          const v = c - e.w / 2 - off;
          off += e.w + NODESEP;
          return v;
        });
        const y = isotonic(u);
        off = 0;
        L.forEach(function (e, i) { e.x = y[i] + off; off += e.w + NODESEP; });
      });
    }
    for (let i = 0; i < 6; i++) { align(true); align(false); }
    align(true);
    let minX = Infinity, maxX = -Infinity;
    el.forEach(function (e) { minX = Math.min(minX, e.x); maxX = Math.max(maxX, e.x + e.w); });
    if (!el.length) { minX = 0; maxX = 0; }
    let y = 0;
    layers.forEach(function (L) {
      const h = L.reduce(function (m, e) { return Math.max(m, e.h); }, 0);
      L.forEach(function (e) { e.x -= minX; e.y = y + (h - e.h) / 2; e.ymid = y + h / 2; });
      y += h + RANKSEP;
    });
    const pos = new Map();
    el.forEach(function (e) { if (!e.dummy) pos.set(e.key, e); });
    const pts = new Map();
    routes.forEach(function (ds, k) { pts.set(k, ds.map(function (d) { return [d.x + d.w / 2, d.ymid]; })); });
    return { w: maxX - minX, h: Math.max(0, y - RANKSEP), pos: pos, pts: pts };
  }

  function place(level, lay, ox, oy, abs, origin) {
    origin.set(level, [ox, oy]);
    lay.pos.forEach(function (e, key) {
      abs.set(key, { x: ox + e.x, y: oy + e.y, w: e.w, h: e.h });
      if (e.sub) place(+key.slice(1), e.sub, ox + e.x + (e.w - e.sub.w) / 2, oy + e.y + HEAD, abs, origin);
    });
  }

  // ------------------------------------------------------------------ drawing
  function drawLines(grp, lines, x, y, w) {
    lines.forEach(function (l, i) {
      const t = svgEl("text", { x: x + w / 2, y: y + 16 + i * 13, "text-anchor": "middle",
        "font-size": i === 0 ? 12 : 10, "font-weight": l[1] ? "bold" : "normal", fill: "#222" }, grp);
      t.textContent = l[0];
    });
  }
  function fillOf(d) {
    if (d.ov && G.g.overlay) return G.g.overlay.colors[d.ov[0]] || "#ddd";
    if (d.k === "input") return "#dff0d8";
    if (d.k === "output") return "#fbe9d0";
    if (d.k === "custom") return "#f6d5f7";
    if (d.k === "quant") return "#fff3c4";
    return "#eef3fb";
  }

  function render() {
    const lay = layoutLevel(-1);
    const abs = new Map(), origin = new Map();
    place(-1, lay, 20, 20, abs, origin);
    G.layout = lay; G.abs = abs;
    while (vp.firstChild) vp.removeChild(vp.firstChild);
    const gl = svgEl("g", {}, vp), el = svgEl("g", {}, vp), nl = svgEl("g", {}, vp);
    const hitSet = new Set(G.hits);
    // Expanded module calls, outermost first.
    G.g.groups.forEach(function (gr, x) {
      const b = abs.get("g" + x);
      if (!b || G.collapsed.has(x)) return;
      let depth = 0;
      for (let p = gr.parent; p >= 0; p = G.g.groups[p].parent) depth++;
      const grp = svgEl("g", { class: "group" + (G.sel === "g" + x ? " sel" : ""), "data-group": x }, gl);
      const ov = worst(G.inside[x]);
      svgEl("rect", { class: "gbox", x: b.x, y: b.y, width: b.w, height: b.h, rx: 6,
        fill: depth % 2 ? "#f4f6fa" : "#eef1f7",
        stroke: ov && G.g.overlay && ov !== "same" && ov !== "ok" ? G.g.overlay.colors[ov] : "#9aa" }, grp);
      const head = svgEl("g", { class: "ghead", "data-group": x }, grp);
      svgEl("rect", { x: b.x + 1, y: b.y + 1, width: b.w - 2, height: HEAD - 2, rx: 5, fill: "#dfe5f0", stroke: "none" }, head);
      const t = svgEl("text", { x: b.x + 6, y: b.y + 13, "font-size": 11, "font-weight": "bold", fill: "#445" }, head);
      t.textContent = "\u2212 " + gr.label;
      svgEl("title", {}, head).textContent = gr.path + " (click to collapse)";
    });
    // Edges: one per pair of visible boxes, routed through the dummies of their common level.
    const seen = new Set();
    G.g.edges.forEach(function (e) {
      const a = rep(e[0]), b = rep(e[1]);
      if (a === b || seen.has(a + "|" + b)) return;
      seen.add(a + "|" + b);
      const ca = G.chain[e[0]], cb = G.chain[e[1]];
      let c = 0;
      while (c < ca.length && c < cb.length && ca[c] === cb[c]) c++;
      const itemAt = function (ch, k, n) { return ch.length > k ? "g" + ch[k] : "n" + n; };
      const openDepth = function (ch) { let k = 0; while (k < ch.length && !G.collapsed.has(ch[k])) k++; return k; };
      const routeAt = function (level, key) {
        const L = level < 0 ? lay : findLayout(level), o = origin.get(level);
        if (!L || !o || !L.pts.has(key)) return [];
        return L.pts.get(key).map(function (p) { return [p[0] + o[0], p[1] + o[1]]; });
      };
      let mid = [];
      for (let k = Math.min(ca.length, openDepth(ca)) - 1; k >= c; k--) mid = mid.concat(routeAt(ca[k], itemAt(ca, k + 1, e[0]) + "|OUT"));
      mid = mid.concat(routeAt(c === 0 ? -1 : ca[c - 1], itemAt(ca, c, e[0]) + "|" + itemAt(cb, c, e[1])));
      for (let k = c; k < Math.min(cb.length, openDepth(cb)); k++) mid = mid.concat(routeAt(cb[k], "IN|" + itemAt(cb, k + 1, e[1])));
      const A = abs.get(a), B = abs.get(b);
      const pts = [[A.x + A.w / 2, A.y + A.h]].concat(mid, [[B.x + B.w / 2, B.y]]);
      let d = "M" + pts[0][0] + "," + pts[0][1];
      for (let i = 1; i < pts.length; i++) {
        const p = pts[i - 1], q = pts[i], my = (p[1] + q[1]) / 2;
        d += " C" + p[0] + "," + my + " " + q[0] + "," + my + " " + q[0] + "," + q[1];
      }
      const path = svgEl("path", { class: "edge", d: d, "marker-end": "url(#arrow)" }, el);
      svgEl("title", {}, path).textContent = e[2];
    });
    // Boxes: nodes and collapsed module calls.
    abs.forEach(function (b, key) {
      const id = +key.slice(1);
      if (key[0] === "n") {
        const d = G.g.nodes[id];
        const grp = svgEl("g", { class: "node" + (G.sel === key ? " sel" : "") + (hitSet.has(id) ? " hit" : ""),
          "data-node": id }, nl);
        svgEl("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: d.k === "op" || d.k === "custom" || d.k === "quant" ? 4 : b.h / 2,
          fill: fillOf(d) }, grp);
        drawLines(grp, nodeLines(id), b.x, b.y, b.w);
        svgEl("title", {}, grp).textContent = d.op + (d.name ? " " + d.name : "");
      } else if (G.collapsed.has(id)) {
        const inside = G.inside[id];
        const hit = inside.some(function (n) { return hitSet.has(n); });
        const grp = svgEl("g", { class: "cgroup" + (G.sel === key ? " sel" : "") + (hit ? " hit" : ""),
          "data-group": id }, nl);
        const ov = worst(inside);
        svgEl("rect", { x: b.x + 4, y: b.y + 4, width: b.w - 4, height: b.h - 4, rx: 5, fill: "#dcd6ec" }, grp);
        svgEl("rect", { class: "front", x: b.x, y: b.y, width: b.w - 4, height: b.h - 4, rx: 5,
          fill: ov && G.g.overlay ? G.g.overlay.colors[ov] : "#efeaf8" }, grp);
        drawLines(grp, groupLines(id), b.x, b.y, b.w - 4);
        svgEl("title", {}, grp).textContent = G.g.groups[id].path + " (click to expand)";
      }
    });
    document.getElementById("summary").textContent = G.g.summary + "; " + abs.size + " boxes shown";
  }
  function findLayout(level) {
    // The layout of an expanded group, found by walking the tree of layouts.
    const path = [];
    for (let x = level; x >= 0; x = G.g.groups[x].parent) path.unshift(x);
    let lay = G.layout;
    for (const x of path) {
      const e = lay.pos.get("g" + x);
      if (!e || !e.sub) return null;
      lay = e.sub;
    }
    return lay;
  }

  // ------------------------------------------------------------------ view
  function applyView() { vp.setAttribute("transform", "translate(" + view.tx + "," + view.ty + ") scale(" + view.k + ")"); }
  function fit() {
    const r = svg.getBoundingClientRect();
    const w = G.layout.w + 40, h = G.layout.h + 40;
    view.k = Math.min(r.width / w, r.height / h, 1.5);
    if (view.k < 0.2) view.k = Math.min(r.width / w, 1);  // very tall: fit the width, show the top
    view.tx = (r.width - w * view.k) / 2; view.ty = Math.max(0, (r.height - h * view.k) / 2);
    applyView();
  }
  function zoom(f, mx, my) {
    const r = svg.getBoundingClientRect();
    if (mx === undefined) { mx = r.width / 2; my = r.height / 2; }
    view.tx = mx - (mx - view.tx) * f; view.ty = my - (my - view.ty) * f; view.k *= f;
    applyView();
  }
  function centerOn(key) {
    const b = G.abs.get(key); if (!b) return;
    const r = svg.getBoundingClientRect();
    view.k = Math.max(view.k, 0.8);
    view.tx = r.width / 2 - (b.x + b.w / 2) * view.k; view.ty = r.height / 2 - (b.y + b.h / 2) * view.k;
    applyView();
  }
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    const r = svg.getBoundingClientRect();
    zoom(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null, moved = false;
  svg.addEventListener("mousedown", function (e) { drag = [e.clientX, e.clientY, view.tx, view.ty]; moved = false; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    const dx = e.clientX - drag[0], dy = e.clientY - drag[1];
    if (Math.abs(dx) + Math.abs(dy) > 3) { moved = true; svg.classList.add("dragging"); }
    if (moved) { view.tx = drag[2] + dx; view.ty = drag[3] + dy; applyView(); }
  });
  window.addEventListener("mouseup", function () { drag = null; svg.classList.remove("dragging"); });
  svg.addEventListener("click", function (e) {
    if (moved) { moved = false; return; }
    const t = e.target.closest ? e.target.closest("[data-node],[data-group]") : null;
    if (!t) return;
    if (t.hasAttribute("data-node")) { select("n" + t.getAttribute("data-node")); return; }
    const x = +t.getAttribute("data-group");
    if (t.classList.contains("cgroup")) { G.collapsed.delete(x); G.sel = "g" + x; render(); showGroup(x); }
    else if (t.classList.contains("ghead")) { G.collapsed.add(x); G.sel = "g" + x; render(); showGroup(x); }
  });

  // ------------------------------------------------------------------ inspection
  function row(table, k, v) {
    const tr = htmlEl("tr", null, table);
    htmlEl("td", k, tr, "k"); htmlEl("td", v, tr);
    return tr;
  }
  function fmt(x) { return typeof x === "number" ? (Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(3) : +x.toPrecision(4)) : x; }
  function select(key) {
    G.sel = key; render();
    if (key[0] === "n") showNode(+key.slice(1)); else showGroup(+key.slice(1));
  }
  function showNode(n) {
    const d = G.g.nodes[n];
    panel.textContent = "";
    const h = htmlEl("h3", d.op, panel);
    if (d.k === "custom") htmlEl("span", "custom op", h, "tag");
    if (d.k === "quant") htmlEl("span", "quantization", h, "tag");
    const t = htmlEl("table", null, panel);
    row(t, "name", d.name);
    if (d.module !== undefined) row(t, "module", d.module || "-");
    if (d.prov && (d.prov[0] || d.prov[1] || d.prov[2])) {
      row(t, "from", (d.prov[0] || "?") + (d.prov[1] ? " " + d.prov[1] : ""));
      if (d.prov[2]) row(t, "source name", d.prov[2]);
    }
    if (d.ov) {
      htmlEl("h4", G.g.overlay.title, panel);
      const o = htmlEl("table", null, panel);
      row(o, "result", d.ov[0]);
      if (d.ov[1]) row(o, "detail", d.ov[1]);
    }
    if (d.attrs && d.attrs.length) {
      htmlEl("h4", "attributes", panel);
      const a = htmlEl("table", null, panel);
      d.attrs.forEach(function (r) { const tr = row(a, r[0], r[2]); htmlEl("span", r[1], tr.firstChild, "tag"); });
    }
    if (d.ins && d.ins.length) {
      htmlEl("h4", "inputs", panel);
      const a = htmlEl("table", null, panel);
      d.ins.forEach(function (r, i) {
        if (r[2] && typeof r[2] === "object") {
          const w = G.g.weights[r[2].w];
          const tr = row(a, "@" + i, w.name + ": " + w.type);
          const parts = [];
          if (w.role) parts.push(w.role);
          if (w.min !== undefined) parts.push("min " + fmt(w.min), "max " + fmt(w.max), "mean " + fmt(w.mean), "std " + fmt(w.std), "zeros " + fmt(100 * w.zeros) + "%");
          parts.push(w.bytes + " bytes");
          htmlEl("div", parts.join(", "), tr.lastChild, "tag");
        } else {
          row(a, "%" + i, r[0] + (r[1] ? ": " + r[1] : "") + (r[2] !== null ? "  \u2190 " + G.g.nodes[r[2]].op : ""));
        }
      });
    }
    if (d.outs && d.outs.length) {
      htmlEl("h4", "outputs", panel);
      const a = htmlEl("table", null, panel);
      d.outs.forEach(function (r, i) { row(a, "%" + i, r[0] + ": " + r[1]); });
    }
  }
  function showGroup(x) {
    const gr = G.g.groups[x], inside = G.inside[x];
    panel.textContent = "";
    htmlEl("h3", gr.path, panel);
    const t = htmlEl("table", null, panel);
    row(t, "module call", gr.label);
    row(t, "nodes", inside.length);
    const ws = new Set();
    inside.forEach(function (n) { (G.g.nodes[n].ins || []).forEach(function (r) { if (r[2] && typeof r[2] === "object") ws.add(r[2].w); }); });
    row(t, "weights", ws.size);
    const ov = worst(inside);
    if (ov) row(t, G.g.overlay.title, ov);
    const ops = {};
    inside.forEach(function (n) { const op = G.g.nodes[n].op; ops[op] = (ops[op] || 0) + 1; });
    htmlEl("h4", "ops", panel);
    const o = htmlEl("table", null, panel);
    Object.keys(ops).sort(function (a, b) { return ops[b] - ops[a]; }).forEach(function (k) { row(o, k, ops[k]); });
    const b = htmlEl("button", G.collapsed.has(x) ? "expand" : "collapse", panel);
    b.addEventListener("click", function () {
      if (G.collapsed.has(x)) G.collapsed.delete(x); else G.collapsed.add(x);
      render(); showGroup(x);
    });
  }

  // ------------------------------------------------------------------ search
  const q = document.getElementById("q"), hits = document.getElementById("hits");
  function search() {
    const s = q.value.trim().toLowerCase();
    G.hits = []; G.hitPos = -1;
    if (s) {
      G.g.nodes.forEach(function (d, n) {
        const hay = [d.op, d.name, d.module || "", d.prov ? d.prov.join(" ") : ""].join(" ").toLowerCase();
        if (hay.indexOf(s) >= 0) G.hits.push(n);
      });
    }
    hits.textContent = s ? G.hits.length + " match" + (G.hits.length === 1 ? "" : "es") + (G.hits.length ? " (Enter: next)" : "") : "";
    render();
  }
  q.addEventListener("input", search);
  q.addEventListener("keydown", function (e) {
    if (e.key !== "Enter" || !G.hits.length) return;
    G.hitPos = (G.hitPos + 1) % G.hits.length;
    const n = G.hits[G.hitPos];
    G.chain[n].forEach(function (x) { G.collapsed.delete(x); });
    select("n" + n);
    centerOn("n" + n);
  });

  // ------------------------------------------------------------------ start
  function show(i) {
    G = prepare(DATA.graphs[i]);
    document.getElementById("title").textContent = DATA.title;
    const lg = document.getElementById("legend");
    lg.textContent = "";
    if (G.g.overlay) {
      htmlEl("span", G.g.overlay.title + ":", lg);
      G.g.overlay.legend.forEach(function (l) {
        const sw = htmlEl("span", null, lg, "sw"); sw.style.background = l[1];
        htmlEl("span", l[0] + " " + l[2], lg);
      });
    }
    q.value = ""; hits.textContent = "";
    render(); fit();
  }
  const sel = document.getElementById("graphsel");
  DATA.graphs.forEach(function (g, i) { const o = htmlEl("option", g.title, sel); o.value = i; });
  sel.style.display = DATA.graphs.length > 1 ? "" : "none";
  sel.addEventListener("change", function () { show(+sel.value); });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("zin").addEventListener("click", function () { zoom(1.25); });
  document.getElementById("zout").addEventListener("click", function () { zoom(0.8); });
  document.getElementById("expand").addEventListener("click", function () { G.collapsed.clear(); render(); fit(); });
  document.getElementById("collapse").addEventListener("click", function () {
    G.g.groups.forEach(function (_, x) { G.collapsed.add(x); }); render(); fit();
  });
  const defs = svgEl("defs", {}, svg);
  const m = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  svgEl("path", { d: "M0,0L10,5L0,10z", fill: "#778" }, m);
  show(0);
  // For tests and scripts: the boxes drawn ({"n3": [x, y, w, h], "g1": ...}) and the edges
  // between them ([["n2", "g1"], ...]).
  window.__mscView = function () {
    const boxes = {};
    G.abs.forEach(function (b, k) { boxes[k] = [b.x, b.y, b.w, b.h]; });
    const edges = [], seen = new Set();
    G.g.edges.forEach(function (e) {
      const a = rep(e[0]), b = rep(e[1]);
      if (a !== b && !seen.has(a + "|" + b)) { seen.add(a + "|" + b); edges.push([a, b]); }
    });
    return { boxes: boxes, edges: edges, width: G.layout.w, height: G.layout.h,
             collapsed: Array.from(G.collapsed) };
  };
  window.__mscReady = true;
})();
