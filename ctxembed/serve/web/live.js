/* ctxembed's live page: controls generated from /api/settings, documents from /api/<view>, drawn by
   view.js (the saved HTML view's renderer) or by ctxembed's own renderers through /api/draw. */
(function () {
  "use strict";
  var MAIN = ["heads", "layers", "causal", "scale", "normalization", "mix"];  /* shown first; the rest fold */
  var EXAMPLES = {
    bank: { word: "bank", sentences: ["we sat on the river bank", "the river bank was muddy after the rain",
      "I deposited money in the bank", "the bank raised interest rates"] },
    apple: { word: "apple", sentences: ["she ate a ripe apple", "apple pie with cinnamon",
      "Apple makes phones", "Apple released a new iPhone"] }
  };
  var registry = null, tab = "attend", values = {}, preset = "default", sequence = 0, timer = null;
  var pending = null, lastAttend = null, chosenToken = null;
  var model = null, shapes = {};  /* the chosen model; layers and heads of each trained model, from its documents */
  /* what tests and benchmarks read: draws so far, whether an answer is still coming, the last body sent */
  var live = window.ctxembedLive = { draws: 0, busy: true, keyAt: null, drawnAt: null, lastBody: null };
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  /* ------------------------------------------------------------------ the model, from the registry */
  function buildModels() {
    var select = $("model");
    select.textContent = "";
    registry.models.forEach(function (m) {
      var label = m.name + (m.installed ? "" : " (not installed)");
      select.appendChild(el("option", { value: m.name, title: m.summary }, label));
    });
    select.value = model;
    select.addEventListener("change", function () { chooseModel(select.value); });
    $("readout").addEventListener("change", function () { schedule(0); });
  }
  /* a trained model's read-out: its own (the mean of its hidden states), or one hidden state, sent as NAME@N */
  function buildReadouts(entry) {
    var select = $("readout"), states = entry.hidden_states;
    select.textContent = "";
    $("readout-field").hidden = !states;
    if (!states) return;
    select.appendChild(el("option", { value: "", title: "the model's own read-out" }, "mean of h0..h" + (states - 1)));
    for (var n = 0; n < states; n++) select.appendChild(el("option", { value: String(n) }, "h" + n));
  }
  function modelName() { var n = $("readout").value; return n === "" ? model : model + "@" + n; }
  function modelEntry() { return registry.models.filter(function (m) { return m.name === model; })[0]; }
  function chooseModel(name) {
    model = name;
    var entry = modelEntry();
    $("model").title = entry.summary;
    $("controls").hidden = $("controls-note").hidden = !entry.settings;  /* a trained model runs as trained */
    $("model-note").hidden = entry.settings;
    $("model-note").textContent = entry.settings ? "" : entry.summary + ": its layers and heads are trained, " +
      "so the settings do not apply.";
    buildReadouts(entry);
    $("view").textContent = "";  /* another model's layers and heads: the drawing starts afresh */
    lastAttend = null;
    syncControls();
    schedule(0);
  }
  /* layers and heads of the chosen model: the settings', or a trained model's (null until a document says) */
  function shape() {
    if (modelEntry().settings) return { layers: values.layers || 1, heads: values.heads || 1 };
    return shapes[model] || null;
  }
  function learnShape(doc) {
    if (!modelEntry().settings && doc.weights && doc.weights.length) {
      shapes[model] = { layers: doc.weights.length, heads: doc.weights[0].length };
      fillExplain();
    }
  }

  /* ------------------------------------------------------------------ controls from the registry */
  function buildControls() {
    var form = $("controls");
    form.textContent = "";
    var presetSelect = el("select", { id: "preset", name: "preset", title: registry.preset_help });
    Object.keys(registry.presets).forEach(function (name) { presetSelect.appendChild(el("option", { value: name }, name)); });
    presetSelect.value = preset;
    presetSelect.addEventListener("change", function () { choosePreset(presetSelect.value); });
    form.appendChild(field("preset", presetSelect, registry.preset_help));
    var more = el("details", { id: "more" });
    more.appendChild(el("summary", {}, "more settings"));
    var order = MAIN.concat(registry.settings.map(function (s) { return s.name; }).filter(function (n) {
      return MAIN.indexOf(n) < 0;
    }));
    var panels = {};
    order.forEach(function (name) {
      var spec = registry.settings.filter(function (s) { return s.name === name; })[0];
      if (!spec) return;
      var row = field(name.replace(/_/g, " "), control(spec), spec.help + limits(spec));
      if (MAIN.indexOf(name) >= 0) { form.appendChild(row); return; }
      if (!panels[spec.panel]) { panels[spec.panel] = more.appendChild(el("fieldset")); panels[spec.panel].appendChild(el("legend", {}, spec.panel)); }
      panels[spec.panel].appendChild(row);
    });
    form.appendChild(more);
    syncControls();
  }
  function limits(spec) {
    if (spec.minimum === null && spec.maximum === null) return "";
    return " [" + (spec.minimum !== null ? spec.minimum + " \u2264 " : "") + "x" + (spec.maximum !== null ? " \u2264 " + spec.maximum : "") + "]";
  }
  function field(label, input, help) {
    var row = el("label", { "class": "field", title: help || "" });
    row.appendChild(el("span", { "class": "name" }, label));
    row.appendChild(input);
    return row;
  }
  function control(spec) {
    var input;
    if (spec.kind === "bool") {
      input = el("input", { type: "checkbox" });
    } else if (spec.kind === "choice") {
      input = el("select");
      spec.choices.forEach(function (c) { input.appendChild(el("option", { value: c }, c)); });
    } else if (spec.kind === "int" || spec.kind === "float") {
      input = el("input", { type: "number", step: spec.kind === "int" ? "1" : "any" });
      if (spec.minimum !== null) input.min = spec.minimum;
      if (spec.maximum !== null) input.max = spec.maximum;
      if (spec.optional) input.placeholder = "auto";
    } else {
      input = el("input", { type: "text", placeholder: spec.metavar || "", spellcheck: "false" });
    }
    input.id = "setting-" + spec.name;
    input.name = spec.name;
    input.className = "setting";
    input.addEventListener(spec.kind === "bool" || spec.kind === "choice" ? "change" : "input", function () {
      values[spec.name] = read(spec, input);
      syncControls();
      schedule(spec.kind === "bool" || spec.kind === "choice" ? 0 : 250);
    });
    return input;
  }
  function read(spec, input) {
    if (spec.kind === "bool") return input.checked;
    if (spec.kind === "int" || spec.kind === "float") {
      if (input.value === "") return spec.optional ? null : registry.presets[preset][spec.name];
      return spec.kind === "int" ? parseInt(input.value, 10) : parseFloat(input.value);
    }
    if (spec.kind === "str" && input.value.trim() === "") return spec.optional ? null : registry.presets[preset][spec.name];
    return input.value;
  }
  function syncControls() {
    registry.settings.forEach(function (spec) {
      var input = $("setting-" + spec.name), v = values[spec.name];
      if (spec.kind === "bool") input.checked = !!v;
      else if (document.activeElement !== input) input.value = v === null || v === undefined ? "" : v;
      var needs = spec.requires, off = needs && values[needs[0]] !== needs[1];
      input.disabled = !!off;
      input.parentNode.classList.toggle("changed", !off && changed(spec.name));
    });
    fillExplain();
  }
  /* explain's layer and head selectors: as many as the model has */
  function fillExplain() {
    var known = shape() || { layers: 1, heads: 1 };
    fillNumbers($("explain-layer"), known.layers, known.layers - 1);
    fillNumbers($("explain-head"), known.heads, 0);
  }
  /* a number the reader chose is kept (within the new count); else the default (the last layer, head 0) */
  function fillNumbers(select, n, fallback) {
    var keep = select.value === "" || !select.chosen ? fallback : Math.min(+select.value, n - 1);
    if (select.options.length !== n) {
      select.textContent = "";
      for (var i = 0; i < n; i++) select.appendChild(el("option", { value: i }, String(i)));
    }
    select.value = keep;
  }
  /* a new preset keeps what the reader changed where the two presets agree (heads, layers, causal...) */
  function choosePreset(name) {
    var before = registry.presets[preset], after = registry.presets[name], kept = {};
    registry.settings.forEach(function (spec) {
      var n = spec.name;
      if (changed(n) && JSON.stringify(before[n]) === JSON.stringify(after[n])) kept[n] = values[n];
    });
    preset = name;
    values = JSON.parse(JSON.stringify(after));
    for (var n in kept) values[n] = kept[n];
    syncControls();
    schedule(0);
  }
  function changed(name) {
    var a = values[name], b = registry.presets[preset][name];
    return !(a === b || (a === null && b === undefined));
  }
  /* the settings part of a body: the preset, and what differs from it */
  function settingsBody() {
    var body = {};
    if (preset !== "default") body.preset = preset;
    registry.settings.forEach(function (spec) {
      var needs = spec.requires;
      if (needs && values[needs[0]] !== needs[1]) return;
      if (changed(spec.name) && values[spec.name] !== null && !(typeof values[spec.name] === "number" && isNaN(values[spec.name])))
        body[spec.name] = values[spec.name];
    });
    return body;
  }

  /* ------------------------------------------------------------------ the command line of a view */
  function quote(text) {
    text = String(text);
    return /^[A-Za-z0-9_.,:\/=+@%-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\\''") + "'";
  }
  /* a command option's flag (--layer, -k ...): the option table's, as /api/settings gives each endpoint key */
  function flagOf(name) {
    for (var endpoint in registry.endpoints) {
      var key = registry.endpoints[endpoint][name];
      if (key && key.flag) return key.flag;
    }
    return "--" + name.replace(/_/g, "-");
  }
  function commandLine(view, body) {
    var parts = ["ctxembed", view === "explain" ? "attend" : view];
    if (view === "compare" || view === "side-by-side") body.sentences.forEach(function (s) { parts.push(quote(s)); });
    else parts.push(quote(body.sentence));
    if (view === "explain") {
      parts.push("--explain");
      if (body.layer !== undefined) parts.push(flagOf("layer"), body.layer);
      if (body.head !== undefined) parts.push(flagOf("head"), body.head);
    }
    if (view === "attend") {  /* the layer and head the drawing shows (its own selectors) */
      var shown = attendShown();
      if (shown.layer !== null) parts.push(flagOf("layer"), shown.layer);
      if (shown.head !== null) parts.push(flagOf("head"), shown.head);
    }
    if (body.word !== undefined) parts.push(flagOf("word"), quote(body.word));
    if (body.k !== undefined) parts.push(flagOf("k"), body.k);
    if (body.window !== undefined) parts.push("--window", body.window);
    registry.vectors_options.forEach(function (p) { parts.push(quote(p)); });
    if (body.model) parts.push("--model", quote(body.model));
    if (body.preset) parts.push("--preset", body.preset);
    registry.settings.forEach(function (spec) {
      if (!(spec.name in body)) return;
      var v = body[spec.name];
      if (spec.kind === "bool") parts.push(v ? spec.flag : spec.off_flag);
      else parts.push(spec.flag, quote(v));
    });
    return parts.join(" ");
  }

  /* the attend drawing's layer and head when they are not the command's defaults (last layer, mean) */
  function attendShown() {
    var root = $("view"), layer = root.querySelector("select.layer"), head = root.querySelector("select.head");
    return {
      layer: layer && +layer.value !== layer.options.length - 1 ? +layer.value : null,
      head: head && head.value !== "mean" ? +head.value : null
    };
  }

  /* ------------------------------------------------------------------ requests */
  function post(path, body, signal) {
    return fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body), signal: signal }).then(function (response) {
      var kind = response.headers.get("Content-Type") || "";
      var read = kind.indexOf("json") >= 0 ? response.json() : response.text();
      return read.then(function (data) {
        if (!response.ok) throw new Error(data && data.error ? data.error : "HTTP " + response.status);
        return data;
      });
    });
  }
  function schedule(delay) {
    sequence += 1;  /* an answer to an earlier state is not drawn */
    live.busy = true;
    if (pending) pending.abort();
    clearTimeout(timer);
    timer = setTimeout(update, delay === undefined ? 120 : delay);
  }
  function status(text, error) {
    var s = $("status");
    s.textContent = text;
    s.className = error ? "error" : "";
  }
  function bodyFor(view) {
    var body = {};
    if (view === "compare" || view === "side-by-side") {
      body.sentences = $("sentences").value.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
      var word = $("word").value.trim();
      if (word) body.word = word;
      if (view === "side-by-side") return body;  /* every model with its own presets: no settings */
    } else {
      body.sentence = $("sentence").value;
    }
    if (view === "explain") {
      var layer = +$("explain-layer").value, head = +$("explain-head").value;
      if (layer !== (shape() || { layers: 1 }).layers - 1) body.layer = layer;
      if (head !== 0) body.head = head;
      var query = $("explain-word").value.trim();  /* the neuron view: that word's q . k_j term by term */
      if (query) body.word = query;
    }
    if (view === "neighbors") {
      body.word = chosenToken;
      var k = parseInt($("k").value, 10);
      if (k && k !== 10) body.k = k;
    }
    if (view === "compare" || view === "neighbors") {  /* a window around the word; empty: the model's own */
      var around = $("window").value.trim();
      if (around !== "") body.window = parseInt(around, 10);
    }
    for (var name in modelBody()) body[name] = modelBody()[name];
    return body;
  }
  /* the model part of a body: the model when not the default, and the settings when it takes them */
  function modelBody() {
    var body = modelName() !== registry.model ? { model: modelName() } : {};
    if (modelEntry().settings) { var s = settingsBody(); for (var name in s) body[name] = s[name]; }
    return body;
  }
  function update() {
    if (!registry) return;
    var view = tab, mine = ++sequence;
    if (pending) pending.abort();
    pending = window.AbortController ? new AbortController() : null;
    var signal = pending ? pending.signal : undefined;
    var entry = modelEntry();
    if (view !== "side-by-side" && !entry.installed) {  /* no request: the command that installs it */
      $("command-line").textContent = entry.install;
      $("view").classList.add("stale");
      live.busy = false;
      status(model + " is not installed here: run the command above, then reload this page");
      return;
    }
    if (view === "explain" && !shape()) { learnShapeFirst(mine, signal); return; }
    var body = bodyFor(view);
    if (view === "neighbors" && !body.word) { neighborsTokens(body, mine, signal); return; }
    live.lastBody = body;
    var started = performance.now();
    $("command-line").textContent = commandLine(view, body);
    /* explain comes drawn (the terminal view, as HTML): its steps would be a large document to send back */
    var path = "/api/" + view + (view === "explain" ? "?as=html" : "");
    post(path, body, signal).then(function (doc) {
      if (mine !== sequence) return null;
      var computed = performance.now() - started;
      return draw(view, doc, signal).then(function () {
        if (mine !== sequence) return;
        live.draws += 1;
        live.drawnAt = performance.now();
        live.busy = false;
        $("view").setAttribute("data-draws", live.draws);
        $("view").classList.remove("stale");
        if (view === "attend") $("command-line").textContent = commandLine(view, body);
        status("answered in " + computed.toFixed(0) + " ms, drawn in " + (performance.now() - started - computed).toFixed(0) + " ms");
        if (view === "attend") { lastAttend = doc; learnShape(doc); }
        if (doc && doc.vectors) showVectors(doc.vectors);  /* a trained model searches its own words */
        if (view === "neighbors") neighborsTokens(body, mine, signal, doc);
      });
    }).catch(function (error) {
      if (error.name === "AbortError" || mine !== sequence) return;
      live.busy = false;
      $("view").classList.add("stale");  /* the drawing is of the last sentence that worked, not this one */
      status(error.message + " (the drawing below is of the last sentence that worked)", true);
    });
  }
  function draw(view, doc, signal) {
    return drawView(view, doc, signal).then(function () { warn($("view"), doc); });
  }
  /* the document's warnings (what the CLI prints on stderr), above the drawing */
  function warn(root, doc) {
    if (!doc || typeof doc !== "object" || !doc.warnings || !doc.warnings.length) return;
    var box = el("div", { "class": "warnings" });
    doc.warnings.forEach(function (line) { box.appendChild(el("p", {}, "warning: " + line)); });
    root.insertBefore(box, root.firstChild);
  }
  function drawView(view, doc, signal) {
    var root = $("view");
    if (view === "attend") {
      var kept = {};
      ["layer", "head"].forEach(function (name) {
        var select = root.querySelector("select." + name);
        if (select) kept[name] = select.value === "mean" ? null : +select.value;
      });
      var L = doc.weights.length, H = doc.weights.length ? doc.weights[0].length : 1;
      if (kept.layer === undefined || kept.layer >= L) kept.layer = null;
      if (kept.head === undefined || kept.head >= H) kept.head = null;
      root.textContent = "";
      if (!doc.attended_positions.length) {
        root.appendChild(el("p", { "class": "hint" }, "no token of this sentence has a vector"));
        return Promise.resolve();
      }
      if (doc.attended_positions.length === 1)
        root.appendChild(el("p", { "class": "hint" }, "one token: with the self mask (--exclude-self) it has no " +
          "other token to attend to, so every key is masked (grey); --include-self lets it attend to itself"));
      root.appendChild(el("div", { "class": "app" }));
      window.ctxembedView(root, doc, kept);  /* its per-token table follows the layer and head shown */
      return Promise.resolve();
    }
    if (view === "explain") {
      root.innerHTML = doc;  /* ctxembed's explain_html escapes what the sentence holds */
      return Promise.resolve();
    }
    var readout = view === "neighbors" ? "hover or click a bar to read its exact value"
      : "hover or click a cell to read its exact value";
    return post("/api/draw?as=svg&width=" + terminalWidth(), doc, signal).then(function (markup) {
      root.innerHTML = '<div class="readout">' + readout + "</div>" + markup;
      window.ctxembedView(root, doc, {});
    });
  }
  function terminalWidth() { return Math.max(60, Math.floor($("view").clientWidth / 7.3)); }
  /* neighbours: the sentence's tokens, to choose one; the first word token until one is chosen */
  function neighborsTokens(body, mine, signal, doc) {
    var box = $("token-choices");
    function show(tokens) {
      box.textContent = "";
      tokens.forEach(function (t) {
        var b = box.appendChild(el("button", { type: "button", "class": "token" + (t === chosenToken ? " on" : "") }, t));
        b.addEventListener("click", function () { chosenToken = t; schedule(0); });
      });
    }
    /* the sentence asked about: the document's text is the part a --window read */
    var known = lastAttendFor(body.sentence);
    if (doc && known) { show(tokensOf(known)); return; }
    var ask = { sentence: body.sentence };
    if (body.model) ask.model = body.model;
    post("/api/attend", ask, signal).then(function (attendDoc) {
      if (mine !== sequence || attendDoc.text !== $("sentence").value) return;
      lastAttend = attendDoc;
      learnShape(attendDoc);
      var tokens = tokensOf(attendDoc);
      if (doc) { show(tokens); return; }  /* a new sentence drawn for the token chosen before: its choices */
      if (!tokens.length) { show([]); status("no token of this sentence has a vector", true); return; }
      chosenToken = firstChoice(tokens);
      show(tokens);
      update();
    }).catch(failedFor(mine));
  }
  /* the token neighbours start on: the compare tab's word when the sentence has it, else its longest word
     (a content word more often than the last or the first token) */
  function firstChoice(tokens) {
    var word = $("word").value.trim().toLowerCase();
    var words = tokens.filter(function (t) { return /\w/.test(t) && t.indexOf("#") < 0; });
    var named = words.filter(function (t) { return t.toLowerCase() === word; })[0];
    if (named) return named;
    return words.reduce(function (best, t) { return t.length > best.length ? t : best; }, words[0] || tokens[0]);
  }
  /* the error of a side request (tokens, a trained model's shape), unless a newer request replaced it */
  function failedFor(mine) {
    return function (error) {
      if (error.name === "AbortError" || mine !== sequence) return;
      live.busy = false;
      status(error.message, true);
    };
  }
  /* explain under a trained model: its layers and heads, from the sentence's attend document, fill the selectors */
  function learnShapeFirst(mine, signal) {
    var ask = { sentence: $("sentence").value };
    if (model !== registry.model) ask.model = model;
    post("/api/attend", ask, signal).then(function (attendDoc) {
      if (mine !== sequence) return;
      learnShape(attendDoc);
      update();
    }).catch(failedFor(mine));
  }
  function showVectors(vectors) {
    if (vectors.name) $("vectors").textContent = "vectors: " + vectors.name + (vectors.dim ? ", " + vectors.dim + " dimensions" : "");
  }
  function lastAttendFor(text) { return lastAttend && lastAttend.text === text ? lastAttend : null; }
  /* the words to send for each token: "bank", then "bank#2" for its second occurrence (as --word takes) */
  function tokensOf(doc) {
    var seen = {};
    return doc.attended_positions.map(function (p) {
      var text = doc.tokens[p].text, key = text.toLowerCase();
      seen[key] = (seen[key] || 0) + 1;
      return seen[key] > 1 ? text + "#" + seen[key] : text;
    });
  }

  /* ------------------------------------------------------------------ wiring */
  function chooseTab(name) {
    tab = name;
    document.querySelectorAll("#tabs button").forEach(function (b) { b.classList.toggle("on", b.getAttribute("data-tab") === name); });
    document.querySelectorAll(".inputs").forEach(function (box) { box.hidden = !box.classList.contains("for-" + name); });
    $("settings").hidden = name === "side-by-side";  /* each model shows with its own presets */
    $("view").textContent = "";
    schedule(0);
  }
  function example(name) {
    $("sentences").value = EXAMPLES[name].sentences.join("\n");
    $("word").value = EXAMPLES[name].word;
    schedule(0);
  }
  document.querySelectorAll("#tabs button").forEach(function (b) {
    b.addEventListener("click", function () { chooseTab(b.getAttribute("data-tab")); });
  });
  document.querySelectorAll("button.example").forEach(function (b) {
    b.addEventListener("click", function () { example(b.getAttribute("data-example")); });
  });
  $("sentence").addEventListener("keydown", function () { live.keyAt = performance.now(); });
  $("sentence").addEventListener("input", function () {
    if (tab === "neighbors") { chosenToken = null; schedule(250); } else schedule();
  });
  $("sentences").addEventListener("input", function () { schedule(250); });
  $("word").addEventListener("input", function () { schedule(250); });
  $("k").addEventListener("input", function () { schedule(250); });
  $("window").addEventListener("input", function () { schedule(250); });
  $("explain-word").addEventListener("input", function () { schedule(250); });
  $("explain-layer").addEventListener("change", function () { this.chosen = true; schedule(0); });
  $("view").addEventListener("change", function (event) {  /* the attend drawing's layer or head */
    if (tab === "attend" && live.lastBody && /\b(layer|head)\b/.test(event.target.className))
      $("command-line").textContent = commandLine("attend", live.lastBody);
  });
  $("explain-head").addEventListener("change", function () { this.chosen = true; schedule(0); });
  $("copy").addEventListener("click", function () {
    var text = $("command-line").textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(text).then(function () { status("copied"); }, function () {});
  });
  $("sentences").value = EXAMPLES.bank.sentences.join("\n");
  $("word").value = EXAMPLES.bank.word;
  fetch("/api/settings").then(function (r) { return r.json(); }).then(function (found) {
    registry = found;
    showVectors(found.vectors);
    values = JSON.parse(JSON.stringify(found.presets[preset]));
    model = found.model;
    buildModels();
    buildControls();
    chooseTab(tab);
  }).catch(function (error) { status("cannot read the settings: " + error.message, true); });
})();
