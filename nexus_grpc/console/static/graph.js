// The graph page's drawing and time slider. The page works without this:
// the form redraws it server side and the tables hold the same graph. Here
// the slider redraws in place from the page's JSON twin (graph.json).
"use strict";
(function () {
  const scriptStart = performance.now();
  const dataBlock = document.getElementById("graph-data");
  const box = document.getElementById("graph-canvas");
  if (!dataBlock || !box || !window.cytoscape) return;
  let view = JSON.parse(dataBlock.textContent);
  const project = view.project.id;
  const COLOURS = { person: "#2557d6", place: "#147a3d", organization: "#a15c07",
                    project: "#7a2ec2", technology: "#0e7490", concept: "#667085" };

  function day(iso) { return iso ? iso.replace("T", " ").replace("Z", " UTC") : "now"; }

  // Around an entity: rings of hops from it, the same every time. The
  // project's hubs: a force-directed layout, which separates the clusters.
  function layoutFor(v, fresh) {
    // A force-directed layout costs seconds past a few dozen nodes; rings
    // (around the entity, or the best connected in the middle) cost none.
    if (v.entity || v.nodes.length > 40) {
      return { name: "concentric", animate: false, minNodeSpacing: 80, spacingFactor: 1.4, padding: 40,
               concentric: function (n) { return v.entity ? 10 - n.data("ring") : n.degree(); },
               levelWidth: function (nodes) { return v.entity ? 1 : Math.max(1, nodes.maxDegree() / 4); } };
    }
    return { name: "cose", animate: false, randomize: fresh, numIter: 1000, padding: 40,
             nodeRepulsion: 12000, idealEdgeLength: 90, nodeOverlap: 20 };
  }

  function elements(v) {
    const els = [];
    v.nodes.forEach(function (n) {
      els.push({ data: { id: "n" + n.id, entity: n.id, name: n.name, type: n.type,
                         ring: n.ring, seed: v.entity ? n.id === v.entity.id : false } });
    });
    v.edges.forEach(function (e) {
      const label = e.current ? e.label : e.label + " (until " + day(e.invalid_time).slice(0, 10) + ")";
      els.push({ data: { id: "e" + e.id, source: "n" + e.from_id, target: "n" + e.to_id,
                         label: label, ended: e.ended } });
    });
    return els;
  }

  const cy = window.cytoscape({
    container: box,
    elements: elements(view),
    maxZoom: 1.6,
    minZoom: 0.2,
    // Panning a large drawing moves a bitmap of it instead of redrawing.
    textureOnViewport: true,
    hideEdgesOnViewport: true,
    style: [
      { selector: "node", style: {
          "label": "data(name)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 3,
          "width": 18, "height": 18, "color": "#1d2330", "text-background-color": "#fff",
          "text-background-opacity": 0.8, "text-background-padding": 1,
          "min-zoomed-font-size": 7,
          "background-color": function (n) { return COLOURS[n.data("type")] || "#98a2b3"; } } },
      { selector: "node[?seed]", style: { "width": 28, "height": 28, "border-width": 3, "border-color": "#1d2330" } },
      { selector: "edge", style: {
          "label": "data(label)", "font-size": 9, "curve-style": "bezier", "width": 1.5,
          "line-color": "#98a2b3", "target-arrow-color": "#98a2b3", "target-arrow-shape": "triangle",
          "text-rotation": "autorotate", "color": "#475467", "text-background-color": "#fff",
          "text-background-opacity": 0.8, "min-zoomed-font-size": 8 } },
      { selector: "edge[?ended]", style: { "line-style": "dashed", "line-color": "#d0d5dd", "color": "#98a2b3" } },
    ],
    layout: layoutFor(view, true),
  });
  box.dataset.drawn = String(view.nodes.length);
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
      const name = document.createElement("td");
      const a = document.createElement("a");
      const params = new URLSearchParams({ entity_id: n.id });
      if (v.as_of) params.set("as_of", v.as_of);
      a.href = "/projects/" + project + "/graph?" + params.toString();
      a.textContent = n.name;
      name.appendChild(a);
      tr.append(name, cell(n.type), cell(String(n.degree), "num"), cell(String(n.mention_count), "num"));
      ents.appendChild(tr);
    });
    document.querySelector("#entities caption").textContent =
      "Entities (" + v.nodes.length + (v.capped ? " of " + v.total_nodes : "") + ")";
    const cap = document.getElementById("graph-cap");
    cap.hidden = !v.capped;
    if (v.capped) cap.textContent = "Showing " + v.nodes.length + " of " + v.total_nodes +
      " entities (the drawing is capped at " + v.max_nodes + "); open an entity to walk from it.";
  }

  function redraw(v) {
    const before = {};
    cy.nodes().forEach(function (n) { before[n.id()] = n.position(); });
    cy.elements().remove();
    cy.add(elements(v));
    let fresh = 0;
    cy.nodes().forEach(function (n) {
      if (before[n.id()]) n.position(before[n.id()]); else fresh += 1;
    });
    if (fresh || v.entity) cy.layout(layoutFor(v, false)).run();
    box.dataset.drawn = String(v.nodes.length);
    tables(v);
  }

  // The time slider: 0..1000 over [first fact, now].
  const slider = document.getElementById("time-slider");
  const label = document.getElementById("slider-label");
  const start = Date.parse(view.slider.min), end = Date.parse(view.slider.max);
  if (!slider || !(end > start)) return;
  document.getElementById("slider-box").hidden = false;
  const span = end - start;
  function position(iso) { return Math.round((Date.parse(iso) - start) / span * 1000); }
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
    params.set("marks", "0");  // the slider's marks do not move
    const mine = ++asked;
    label.textContent = day(asOf);
    fetch("/projects/" + project + "/graph.json?" + params.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (v) {
        if (mine !== asked) return;
        v.slider = view.slider;
        view = v;
        redraw(v);
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
})();
