/* ctxembed's interactive view: no network, no library. ctxembedView(root) draws the document `root`
   holds as JSON (a saved page, a notebook); the live page passes the document and the view instead. */
window.ctxembedView = function (root, given, givenView) {
  "use strict";
  var doc = given || JSON.parse(root.querySelector("script.ctxembed-data").textContent);
  var view = givenView || JSON.parse(root.getAttribute("data-view") || "{}");
  var NS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, text, ns) {
    var node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function blue(share) {  /* white to dark blue: figures.SEQUENTIAL, the scale of every view */
    var stops = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
    share = Math.max(0, Math.min(1, share)) * 4;
    var i = Math.min(3, Math.floor(share)), t = share - i, a = stops[i], b = stops[i + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + (b[c] - a[c]) * t); }).join(",") + ")";
  }

  /* the model view (all_layers) is a figure, like every other document */
  if (/^ctxembed\.attend\/\d+$/.test(doc.schema) && doc.weights && !view.all_layers) attention(); else generic();

  /* ------------------------------------------------------------------ any figure: hover or click a cell */
  function generic() {
    var readout = root.querySelector(".readout");
    var pinned = null;
    function show(cell) {
      readout.textContent = cell ? cell.getAttribute("data-label") + ": " + cell.getAttribute("data-value") : "";
    }
    root.querySelectorAll(".cell").forEach(function (cell) {
      cell.addEventListener("mouseenter", function () { show(cell); });
      cell.addEventListener("mouseleave", function () { show(pinned); });
      cell.addEventListener("click", function () {
        if (pinned) pinned.classList.remove("sel");
        pinned = pinned === cell ? null : cell;
        if (pinned) pinned.classList.add("sel");
        show(pinned || cell);
      });
    });
  }

  /* ------------------------------------------------------------------ attention: bertviz-like head view */
  function attention() {
    var weights = doc.weights;  /* [layer][head][query][key] */
    var L = weights.length, H = weights[0].length;
    var seen = {};  /* a word's second and later tokens as --word names them (the, ..., the#2), as the CLI labels them */
    var tokens = doc.attended_positions.map(function (p) {
      var text = doc.tokens[p].text;
      seen[text] = (seen[text] || 0) + 1;
      return (seen[text] > 1 ? text + "#" + seen[text] : text) +
        ({ estimated: "\u00b0", subword: "*", none: "\u2205", pieces: "+", unknown: "?" }[doc.tokens[p].source] || "");
    });
    var T = tokens.length;
    var state = {
      layer: view.layer === null || view.layer === undefined ? L - 1 : view.layer,
      head: view.head === null || view.head === undefined ? (H > 1 ? "mean" : 0) : view.head,
      side: null, index: null, pinned: false,
      reading: doc.attention ? doc.attention.reading : "raw"  /* --attention: a reading beside the weights */
    };
    var reading = doc.attention || null;
    var app = root.querySelector(".app");
    app.appendChild(el("h2", {}, "attention weights"));
    app.appendChild(el("div", { "class": "meta" }, doc.text));
    app.appendChild(el("div", { "class": "meta" }, "settings: " + doc.settings_summary));
    var controls = app.appendChild(el("div", { "class": "controls" }));
    if (L > 1) {
      var layerSelect = el("select", { "class": "layer" });
      for (var l = 0; l < L; l++) layerSelect.appendChild(el("option", { value: l }, "layer " + l));
      layerSelect.value = state.layer;
      layerSelect.addEventListener("change", function () { state.layer = +layerSelect.value; draw(); });
      var label = el("label", {}, "layer ");
      label.appendChild(layerSelect); controls.appendChild(label);
    }
    if (H > 1) {
      var headSelect = el("select", { "class": "head" });
      headSelect.appendChild(el("option", { value: "mean" }, "mean of " + H + " heads"));
      for (var h = 0; h < H; h++) headSelect.appendChild(el("option", { value: h }, "head " + h));
      headSelect.value = state.head;
      headSelect.addEventListener("change", function () {
        state.head = headSelect.value === "mean" ? "mean" : +headSelect.value; draw();
      });
      var hl = el("label", {}, "head ");
      hl.appendChild(headSelect); controls.appendChild(hl);
    }
    if (reading) {
      var readingSelect = el("select", { "class": "reading" });
      readingSelect.appendChild(el("option", { value: reading.reading }, reading.reading));
      readingSelect.appendChild(el("option", { value: "raw" }, "raw weights"));
      readingSelect.addEventListener("change", function () { state.reading = readingSelect.value; draw(); });
      var rl = el("label", {}, "show ");
      rl.appendChild(readingSelect); controls.appendChild(rl);
    }
    controls.appendChild(el("span", { "class": "hint" },
      "hover a token to see its weights; click to pin (left: what it attends to, right: what attends to it)" +
      (T * T > 4000 ? "; a sentence this long gets lines for the hovered or pinned token only" : "")));
    var legend = { estimated: "\u00b0 vector estimated", subword: "* vector built from character n-grams",
      none: "\u2205 no vector (zero vector, --oov zero)", pieces: "+ the mean of the word's wordpieces",
      unknown: "? read as [UNK]: the model cannot spell the word" };
    var marks = Object.keys(legend).filter(function (s) {
      return doc.attended_positions.some(function (p) { return doc.tokens[p].source === s; });
    });
    if (marks.length) app.appendChild(el("div", { "class": "hint sources" }, marks.map(function (s) { return legend[s]; }).join("; ")));
    var panes = app.appendChild(el("div", { "class": "panes" }));
    var rowH = 22, width = 420;
    var longest = Math.max.apply(null, tokens.map(function (t) { return t.length; }));
    var colW = Math.min(200, 12 + 8 * longest);
    var svg = el("svg", { "class": "lines", width: width + 2 * colW, height: rowH * T + 30 }, null, NS);
    panes.appendChild(svg);
    var info = panes.appendChild(el("div", { "class": "info" }));
    var matrix = app.appendChild(el("table", { "class": "matrix" }));
    var perToken = app.appendChild(el("div", { "class": "per-token" }));
    var hidden = doc.hidden || null;  /* a subword model's [CLS], [SEP]: each word's share the word maps leave out */
    var hiddenName = hidden ? hidden.units.join("+") : "";

    function masked(i, j) {  /* the keys the settings forced to weight 0 (a reading lists its own) */
      var listed = (state.reading !== "raw" ? reading.masked_keys : doc.masked_keys) || [];
      return (listed[i] || []).indexOf(j) >= 0;
    }
    function matrixNow() {  /* (T, T) of the chosen layer and head (or the mean of heads), or of the reading */
      if (state.reading !== "raw") {
        return state.head === "mean" || !reading.heads ? reading.layers[state.layer] : reading.heads[state.layer][state.head];
      }
      var layer = weights[state.layer];
      if (state.head !== "mean") return layer[state.head];
      return layer[0].map(function (row, i) {
        return row.map(function (_, j) {
          var s = 0; for (var h = 0; h < H; h++) s += layer[h][i][j]; return s / H;
        });
      });
    }
    function hiddenNow() {  /* (T,) each word's share to [CLS]+[SEP] in the layer and head shown, or null */
      if (!hidden || state.reading !== "raw") return null;
      var layer = hidden.share[state.layer];  /* [head][query][unit] */
      var heads = state.head === "mean" ? layer : [layer[state.head]];
      return tokens.map(function (_, i) {
        var s = 0;
        heads.forEach(function (h) { h[i].forEach(function (v) { s += v; }); });
        return s / heads.length;
      });
    }
    var lines = [], left = [], right = [], highlights = [];
    for (var i = 0; i < T; i++) {
      var y = 20 + i * rowH;
      [["q", colW - 6, "end", left], ["k", width + colW + 6, "start", right]].forEach(function (spec) {
        var hlRect = el("rect", { "class": "hl", x: spec[0] === "q" ? 0 : width + colW, y: y - 15, width: colW,
          height: rowH - 2, visibility: "hidden" }, null, NS);
        svg.appendChild(hlRect); highlights.push(hlRect);
        var text = el("text", { "class": "tok " + spec[0], x: spec[1], y: y, "text-anchor": spec[2], "data-i": i },
          tokens[i], NS);
        text.hlRect = hlRect;
        svg.appendChild(text); spec[3].push(text);
      });
    }
    /* every pair gets a line up to ALL_LINES pairs; longer sentences draw the selected token's lines only */
    var ALL_LINES = 4000, MATRIX_MAX = 80, every = T * T <= ALL_LINES;
    function makeLine(a, b) {
      var line = el("line", { x1: colW, y1: 15 + a * rowH, x2: width + colW, y2: 15 + b * rowH,
        "data-q": a, "data-k": b }, null, NS);
      svg.insertBefore(line, svg.firstChild);
      return line;
    }
    var drawn = [];
    if (every) for (var a = 0; a < T; a++) { lines.push([]); for (var b = 0; b < T; b++) lines[a].push(makeLine(a, b)); }
    function select(side, index, pin) {
      if (pin) {
        var same = state.pinned && state.side === side && state.index === index;
        state.pinned = !same;
        state.side = same ? null : side; state.index = same ? null : index;
      } else if (!state.pinned) { state.side = side; state.index = index; }
      draw();
    }
    left.forEach(function (t, i) {
      t.addEventListener("mouseenter", function () { select("q", i, false); });
      t.addEventListener("click", function () { select("q", i, true); });
    });
    right.forEach(function (t, j) {
      t.addEventListener("mouseenter", function () { select("k", j, false); });
      t.addEventListener("click", function () { select("k", j, true); });
    });
    svg.addEventListener("mouseleave", function () { if (!state.pinned) { state.side = null; state.index = null; draw(); } });

    function draw() {
      var w = matrixNow();
      var top = 0;
      w.forEach(function (row) { row.forEach(function (v) { if (v > top) top = v; }); });
      top = top || 1;
      if (every) {
        for (var i = 0; i < T; i++) for (var j = 0; j < T; j++) paint(lines[i][j], w[i][j], top,
          state.side === null || (state.side === "q" ? i === state.index : j === state.index));
      } else {
        drawn.forEach(function (line) { line.remove(); });
        drawn = [];
        if (state.side !== null) for (var n = 0; n < T; n++) {
          var q = state.side === "q" ? state.index : n, k = state.side === "q" ? n : state.index;
          var line = makeLine(q, k); drawn.push(line); paint(line, w[q][k], top, true);
        }
      }
      [left, right].forEach(function (column, c) {
        column.forEach(function (t, i) {
          var active = state.side === (c === 0 ? "q" : "k") && state.index === i;
          t.setAttribute("class", "tok " + (c === 0 ? "q" : "k") + (active ? " active" : ""));
          t.hlRect.setAttribute("visibility", active ? "visible" : "hidden");
        });
      });
      var shares = hiddenNow();
      drawInfo(w, shares); drawMatrix(w, top, shares); drawPerToken(w, shares);
    }
    /* a line's width and opacity: its weight itself (bertviz's scale), so near-uniform attention reads as
       faint lines, not as a hairball of full ones; the matrix below shades relative to its largest weight */
    function paint(line, v, top, on) {
      line.setAttribute("stroke-width", on ? 1 + 5 * v : 1);
      line.setAttribute("stroke-opacity", on ? Math.min(1, v).toFixed(4) : 0);
      line.setAttribute("class", on && state.side !== null ? "active" : "");
    }
    function drawInfo(w, shares) {
      info.textContent = "";
      var whole = state.reading === "raw" ? "mean of " + H + " heads" : "whole layer";
      var heading = (state.reading === "raw" ? "" : state.reading + ", ") + "layer " + state.layer + ", " +
        (state.head === "mean" || (state.reading !== "raw" && !reading.heads) ? whole : "head " + state.head);
      info.appendChild(el("div", { "class": "meta" }, heading));
      if (state.side === null) {
        info.appendChild(el("div", { "class": "hint" }, "no token selected"));
        return;
      }
      var i = state.index, word = tokens[i];
      info.appendChild(el("div", { "class": "selected" }, state.side === "q"
        ? "\u201c" + word + "\u201d (#" + doc.attended_positions[i] + ") attends to:"
        : "attention paid to \u201c" + word + "\u201d (#" + doc.attended_positions[i] + ") by:"));
      var table = info.appendChild(el("table", { "class": "numbers", "data-side": state.side, "data-index": i }));
      for (var j = 0; j < T; j++) {
        var q = state.side === "q" ? i : j, k = state.side === "q" ? j : i, v = w[q][k];
        var tr = table.appendChild(el("tr", { "data-j": j }));
        tr.appendChild(el("td", { "class": "t" }, tokens[j]));
        tr.appendChild(el("td", { "class": "w" }, masked(q, k) ? "masked" : v.toFixed(3)));
        var bar = tr.appendChild(el("td", { "class": "bar" }));
        bar.appendChild(el("span", { style: "width:" + Math.round(120 * v) + "px" }));
      }
      if (shares && state.side === "q") {
        var special = table.appendChild(el("tr", { "class": "hidden-share" }));
        special.appendChild(el("td", { "class": "t" }, hiddenName));
        special.appendChild(el("td", { "class": "w" }, shares[i].toFixed(3)));
        special.appendChild(el("td", { "class": "hint" }, "before renormalising: the words' shares above are of the rest"));
      }
    }
    function drawMatrix(w, top, shares) {
      matrix.textContent = "";
      if (T > MATRIX_MAX) {
        matrix.appendChild(el("caption", {}, "the matrix is drawn for up to " + MATRIX_MAX + " tokens; " +
          "this sentence has " + T + ": hover or click the tokens above"));
        return;
      }
      matrix.appendChild(el("caption", {}, "rows: the attending token (query); columns: the token attended to (key)"));
      var head = matrix.appendChild(el("tr"));
      head.appendChild(el("th"));
      tokens.forEach(function (t) { head.appendChild(el("th", { "class": "col" }, t)); });
      if (shares) head.appendChild(el("th", { "class": "col hidden-share", title: "the share of each row's attention " +
        "that went to " + hidden.units.join(" and ") + " before the row was renormalised over the words" }, hiddenName));
      for (var i = 0; i < T; i++) {
        var tr = matrix.appendChild(el("tr"));
        var th = tr.appendChild(el("th", { "class": "row", "data-i": i }, tokens[i]));
        th.addEventListener("click", select.bind(null, "q", i, true));
        for (var j = 0; j < T; j++) {
          var v = w[i][j], share = v / top;
          var td = tr.appendChild(el("td", {
            title: tokens[i] + " \u2192 " + tokens[j] + ": " + (masked(i, j) ? "masked" : v.toFixed(3)),
            style: "background:" + (masked(i, j) ? "rgb(200,200,200)" : blue(share)) + ";color:" + (share > 0.6 ? "#fff" : "#222")
          }, masked(i, j) ? "\u00b7" : (v === 0 ? "0" : v.toFixed(2).replace(/^0/, ""))));
          if ((state.side === "q" && i === state.index) || (state.side === "k" && j === state.index)) td.className = "sel";
        }
        if (shares) tr.appendChild(el("td", { "class": "hidden-share", title: tokens[i] + " \u2192 " + hiddenName + ": " +
          shares[i].toFixed(3) + " (hidden from the row)" }, shares[i].toFixed(2).replace(/^0/, "")));
      }
    }
    /* the CLI's per-token table, of the map shown: what each token attends to most, [CLS]+[SEP] when the
       model has them, and how far context moved it */
    function drawPerToken(w, shares) {
      perToken.textContent = "";
      var heading = (state.reading === "raw" ? "" : state.reading + ", ") + "layer " + state.layer + ", " +
        (state.head === "mean" ? (state.reading === "raw" ? "mean of " + H + " heads" : "whole layer") : "head " + state.head);
      perToken.appendChild(el("h3", {}, "per token (" + heading + ")"));
      var table = perToken.appendChild(el("table", { "class": "numbers" }));
      var head = table.appendChild(el("tr"));
      ["#", "token", "attends most to"].concat(shares ? [hiddenName] : [], ["cos(static, contextual)"]).forEach(function (t) {
        head.appendChild(el("th", {}, t));
      });
      var top = Math.max(1, doc.top_attended.reduce(function (m, r) { return Math.max(m, r.length); }, 0));
      tokens.forEach(function (label, i) {
        var order = w[i].map(function (v, j) { return j; }).filter(function (j) { return w[i][j] > 0; });
        order.sort(function (a, b) { return w[i][b] - w[i][a] || a - b; });
        var listed = order.slice(0, top).map(function (j) { return tokens[j] + " " + w[i][j].toFixed(2); }).join(", ");
        var cos = doc.static_contextual_cosine[i];
        var tr = table.appendChild(el("tr"));
        tr.appendChild(el("td", {}, String(doc.attended_positions[i])));
        tr.appendChild(el("td", { "class": "t" }, label));
        tr.appendChild(el("td", {}, listed || "(no token to attend to: every key is masked)"));
        if (shares) tr.appendChild(el("td", { "class": "w" }, shares[i].toFixed(2)));
        tr.appendChild(el("td", { "class": "w" }, cos === null ? "nan" : cos.toFixed(3)));
      });
    }
    draw();
  }
};
