// The graph page's drawing and time slider. The page works without this:
// the form redraws it server side and the tables hold the same graph. Here
// the slider redraws in place from the page's JSON twin (graph.json).
//
// The layout is made once, over every entity the drawing may show at any
// date (view.layout), from fixed starting places: the same page draws the
// same picture on every load, and an entity keeps its place while the
// slider moves (entities not there at a date are hidden, not removed).
"use strict";
(function () {
  const scriptStart = performance.now();
  const dataBlock = document.getElementById("graph-data");
  const box = document.getElementById("graph-canvas");
  if (!dataBlock || !box || !window.cytoscape) return;
  let view = JSON.parse(dataBlock.textContent);
  const project = view.project.id;
  const COLOURS = view.colours || {};
  const OTHER = "#98a2b3";
  const skeleton = view.layout || {
    nodes: view.nodes.map(function (n) { return [n.id, n.ring, n.name, n.type]; }),
    edges: view.edges.map(function (e) { return [e.from_id, e.to_id]; }),
  };

  function day(iso) { return iso ? iso.replace("T", " ").replace("Z", " UTC") : "now"; }

  // Around an entity: rings of hops from it. The project's hubs: a
  // force-directed layout, which separates the clusters. Both leave room
  // for the labels, and neither draws a random number: the starting places
  // are fixed (startAt), so the result is the same on every load.
  function layoutFor() {
    // A force-directed layout costs seconds past a few dozen nodes; rings
    // (around the entity, or the best connected in the middle) cost none.
    if (rings) {
      // Measuring every label costs more than the rings themselves: the
      // spacing leaves room for the longest name instead.
      const longest = skeleton.nodes.reduce(function (most, n) { return Math.max(most, n[2].length); }, 0);
      const most = Math.max(0, ...Object.values(degree));
      return { name: "concentric", animate: false, fit: true, padding: 50, avoidOverlap: true,
               minNodeSpacing: Math.min(140, Math.max(80, 7 * longest)), spacingFactor: 1.75,
               concentric: function (n) { return view.entity ? 10 - n.data("ring") : degree[n.id()] || 0; },
               levelWidth: function () { return view.entity ? 1 : Math.max(1, most / 4); } };
    }
    return { name: "cose", animate: false, randomize: false, fit: true, padding: 40, numIter: 1500,
             nodeDimensionsIncludeLabels: true, nodeRepulsion: 12000, idealEdgeLength: 100,
             edgeElasticity: 100, nodeOverlap: 40, gravity: 1, componentSpacing: 80 };
  }

  // On an ellipse as wide as the canvas is, in the server's order.
  function startAt(index, count) {
    const angle = 2 * Math.PI * index / Math.max(1, count);
    const radius = 60 + 20 * count;
    return { x: Math.round(2 * radius * Math.cos(angle)), y: Math.round(radius * Math.sin(angle)) };
  }

  function nodeData(id, name, type, ring) {
    return { id: "n" + id, entity: id, name: name, type: type, ring: ring,
             seed: view.entity ? id === view.entity.id : false };
  }

  function edgeElement(e) {
    const label = e.current ? e.label : e.label + " (until " + day(e.invalid_time).slice(0, 10) + ")";
    return { group: "edges", data: { id: "e" + e.id, source: "n" + e.from_id, target: "n" + e.to_id,
                                     label: label, ended: e.ended } };
  }

  const laidOut = skeleton.nodes.map(function (n, i) {
    return { group: "nodes", data: nodeData(n[0], n[2], n[3], n[1]), position: startAt(i, skeleton.nodes.length) };
  });
  // Every fact ever between them: each entity's degree (the rings' order),
  // and the springs of the force-directed layout (only it needs them drawn).
  const degree = {};
  skeleton.edges.forEach(function (pair) {
    degree["n" + pair[0]] = (degree["n" + pair[0]] || 0) + 1;
    degree["n" + pair[1]] = (degree["n" + pair[1]] || 0) + 1;
  });
  const rings = view.entity || skeleton.nodes.length > 40;
  const links = rings ? [] : skeleton.edges.map(function (pair, i) {
    return { group: "edges", classes: "skeleton",
             data: { id: "s" + i, source: "n" + pair[0], target: "n" + pair[1], label: "" } };
  });

  const cy = window.cytoscape({
    container: box,
    elements: laidOut.concat(links),
    layout: { name: "preset" },  // the fixed starting places, until the layout below runs
    maxZoom: 1.6,
    minZoom: 0.2,
    // Panning a large drawing moves a bitmap of it instead of redrawing.
    textureOnViewport: true,
    hideEdgesOnViewport: true,
    style: [
      { selector: "node", style: {
          "label": "data(name)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 3,
          // Names are drawn under the facts (the edges' z-index) with an
          // outline, not a filled box: a box under the node hid the arrowhead
          // of every fact arriving from below.
          "width": 18, "height": 18, "color": "#1d2330", "text-outline-color": "#fff",
          "text-outline-width": 2, "text-outline-opacity": 0.9,
          "z-index-compare": "manual", "z-index": 1,
          "min-zoomed-font-size": 7,
          "background-color": function (n) { return COLOURS[n.data("type")] || OTHER; } } },
      { selector: "node[?seed]", style: { "width": 28, "height": 28, "border-width": 3, "border-color": "#1d2330" } },
      { selector: "node.idle", style: { "background-opacity": 0.3, "border-width": 1.5, "border-style": "dashed",
                                        "border-color": "#667085", "color": "#98a2b3" } },
      { selector: "node.absent", style: { "display": "none" } },
      { selector: "edge", style: {
          "label": "data(label)", "font-size": 9, "curve-style": "bezier", "width": 1.5,
          "line-color": "#98a2b3", "target-arrow-color": "#98a2b3", "target-arrow-shape": "triangle",
          "text-rotation": "autorotate", "color": "#475467", "text-background-color": "#fcfcfd",
          "text-background-opacity": 0.85, "text-background-padding": 1, "min-zoomed-font-size": 8,
          "z-index-compare": "manual", "z-index": 2 } },
      { selector: "edge[?ended]", style: { "line-style": "dashed", "line-color": "#d0d5dd", "color": "#98a2b3" } },
    ],
  });
  const placed = {};

  // When the first drawing reached the canvas (ms since navigation): what the
  // benchmark reads (bench/console_pages.py).
  cy.one("render", function () { box.dataset.drawnMs = String(Math.round(performance.now())); });
  box.dataset.scriptMs = String(Math.round(scriptStart));

  cy.on("tap", "node", function (evt) {
    const params = new URLSearchParams();
    params.set("entity_id", evt.target.data("entity"));
    if (view.as_of) params.set("as_of", view.as_of);
    window.location.href = "/projects/" + project + "/graph?" + params.toString();
  });

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function tables(v) {
    const facts = document.querySelector("#facts tbody");
    facts.replaceChildren();
    v.edges.forEach(function (e) {
      const tr = document.createElement("tr");
      tr.className = "fact" + (e.ended ? " ended" : "");
      [e.from_name, e.label, e.to_name, day(e.valid_time), e.invalid_time ? day(e.invalid_time) : "now"]
        .forEach(function (t) { tr.appendChild(cell(t)); });
      facts.appendChild(tr);
    });
    if (!v.edges.length) {
      const tr = document.createElement("tr");
      const td = cell(v.as_of ? "No facts held then." : "No facts.");
      td.colSpan = 5; tr.appendChild(td); facts.appendChild(tr);
    }
    document.querySelector("#facts caption").textContent = "Facts (" + v.edges.length + ")";
    const ents = document.querySelector("#entities tbody");
    ents.replaceChildren();
    v.nodes.forEach(function (n) {
      const tr = document.createElement("tr");
      if (!n.held) tr.className = "idle";
      const name = document.createElement("td");
      const a = document.createElement("a");
      const params = new URLSearchParams({ entity_id: n.id });
      if (v.as_of) params.set("as_of", v.as_of);
      a.href = "/projects/" + project + "/graph?" + params.toString();
      a.textContent = n.name;
      name.appendChild(a);
      if (!n.held) {
        const note = document.createElement("span");
        note.className = "muted";
        note.textContent = " no fact " + (v.as_of ? "then" : "now");
        name.appendChild(note);
      }
      tr.append(name, cell(n.type), cell(String(n.degree), "num"), cell(String(n.mention_count), "num"));
      ents.appendChild(tr);
    });
    if (!v.nodes.length) {
      const tr = document.createElement("tr");
      const td = cell(v.as_of ? "No entity had a fact yet then." : "No entities yet.");
      td.colSpan = 4; tr.appendChild(td); ents.appendChild(tr);
    }
    document.querySelector("#entities caption").textContent =
      "Entities (" + v.nodes.length + (v.capped ? " of " + v.total_nodes : "") + ")";
    const cap = document.getElementById("graph-cap");
    cap.hidden = !v.capped;
    if (v.capped) cap.textContent = "Showing " + v.nodes.length + " of " + v.total_nodes +
      " entities (the drawing is capped at " + v.max_nodes + "); open an entity to walk from it.";
  }

  // What the words around the drawing say follows the date drawn.
  function captions(v) {
    const when = document.getElementById("graph-when");
    if (when) when.textContent = v.include_history ? "Every fact, ended ones with their interval."
      : v.as_of ? "Facts that held at " + day(v.as_of) + "." : "Facts that hold now.";
    const idle = document.getElementById("legend-idle");
    if (idle) idle.textContent = "no fact " + (v.as_of ? "then" : "now");
    const now = document.getElementById("now-link");
    if (now) now.hidden = !(v.as_of || v.include_history);
    const note = document.getElementById("canvas-note");
    if (note) {
      note.hidden = v.nodes.length > 0;
      if (!v.nodes.length && view.slider) {
        note.textContent = "No entity had a fact yet on " + day(v.as_of) + ": the first fact began " +
          day(view.slider.marks[0]) + ".";
      }
    }
  }

  function draw(v) {
    const present = {};
    v.nodes.forEach(function (n, i) {
      present["n" + n.id] = n;
      if (cy.getElementById("n" + n.id).empty()) {
        // Beyond the layout's cap: a fixed place of its own, the others stay.
        const at = placed["n" + n.id] || startAt(i, v.nodes.length);
        placed["n" + n.id] = at;
        cy.add({ group: "nodes", data: nodeData(n.id, n.name, n.type, n.ring), position: at });
      }
    });
    cy.batch(function () {
      cy.edges().remove();
      cy.nodes().forEach(function (node) {
        const n = present[node.id()];
        node.toggleClass("absent", !n);
        node.toggleClass("idle", !!n && !n.held);
        if (n) node.data("name", n.name);
      });
      cy.add(v.edges.map(edgeElement));
    });
    box.dataset.drawn = String(v.nodes.length);
  }

  const layout = cy.layout(layoutFor());
  layout.one("layoutstop", function () {
    // The layout's links only placed the nodes: the facts drawn are the view's.
    cy.edges(".skeleton").remove();
    // A drawing taller than wide turned on its side: the canvas is wide.
    const bounds = cy.nodes().boundingBox();
    if (bounds.h > bounds.w) {
      cy.nodes().positions(function (n) { return { x: n.position("y"), y: n.position("x") }; });
      cy.fit(undefined, 40);
    }
    cy.nodes().forEach(function (n) { placed[n.id()] = Object.assign({}, n.position()); });
    draw(view);
    captions(view);
    slide();
  });
  layout.run();

  // The time slider: 0..999 over the facts' span, 1000 is now.
  function slide() {
    const slider = document.getElementById("time-slider");
    const label = document.getElementById("slider-label");
    if (!slider || !view.slider) return;
    const start = Date.parse(view.slider.min), end = Date.parse(view.slider.max);
    if (!(end > start)) return;
    document.getElementById("slider-box").hidden = false;
    const span = end - start;
    function position(iso) {
      return Math.max(0, Math.min(999, Math.round((Date.parse(iso) - start) / span * 1000)));
    }
    function timeAt(pos) {
      if (pos >= 1000) return null;
      return new Date(start + span * pos / 1000).toISOString().replace(/\.\d+Z$/, "Z");
    }
    const marks = document.getElementById("fact-times");
    view.slider.marks.forEach(function (iso) {
      const o = document.createElement("option"); o.value = position(iso); marks.appendChild(o);
    });
    slider.value = view.as_of ? position(view.as_of) : 1000;
    let asked = 0, timer = null;

    function fetchAt(asOf) {
      const params = new URLSearchParams();
      if (view.entity) { params.set("entity_id", view.entity.id); params.set("depth", view.depth); }
      if (asOf) params.set("as_of", asOf);
      const shown = params.toString();
      params.set("marks", "0");  // the slider's marks and the layout do not move
      const mine = ++asked;
      label.textContent = day(asOf);
      fetch("/projects/" + project + "/graph.json?" + params.toString(), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (v) {
          if (mine !== asked) return;
          v.slider = view.slider;
          v.layout = view.layout;
          view = v;
          draw(v);
          tables(v);
          captions(v);
          const input = document.getElementById("as-of");
          if (input) input.value = asOf ? asOf.slice(0, 19) : "";
          const history = document.querySelector('input[name="include_history"]');
          if (history) history.checked = false;
          window.history.replaceState(null, "", "/projects/" + project + "/graph" + (shown ? "?" + shown : ""));
          box.dataset.asOf = asOf || "now";
        })
        .catch(function () { label.textContent = day(asOf) + " (could not load)"; });
    }

    slider.addEventListener("input", function () {
      label.textContent = day(timeAt(Number(slider.value)));
      clearTimeout(timer);
      timer = setTimeout(function () { fetchAt(timeAt(Number(slider.value))); }, 120);
    });
  }
})();
