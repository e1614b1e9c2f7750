// The compatibility selector (docs/compatibility.md): filters docs/selector.json in the
// browser, no server. Generated data: `envgen table --write`; its format is described in
// envgen/results/selector.py and envgen/schemas/selector.schema.json.
//
// Stable markup for tests and scripts: each control has data-filter="<name>", each row
// data-combination, data-tier and data-flavor, each copyable command data-command, each
// reason of an empty choice data-reason (its sources behind a "source" disclosure). The
// selection lives in the URL's query string (?framework=deepspeed&cuda=12.1), so a link
// shares it; the flavor's default (no conda: venv or os-package) is not written there.
(function () {
  "use strict";

  var FILTERS = ["framework", "framework_version", "cuda", "torch", "python", "os", "gpu", "flavor", "tier"];
  var EXPLAINED = ["framework", "cuda", "torch", "python", "os", "gpu"];
  var PAGE = 50; // rows shown at first, and per "Show more"
  var script = document.currentScript;
  var siteRoot = new URL("..", script ? script.src : location.href); // js/ is one level down

  function versionKey(v) {
    return String(v).split(/[.+]/).map(function (p) {
      var n = parseInt(p, 10);
      return isNaN(n) ? p : n;
    });
  }
  function newestFirst(a, b) {
    var x = versionKey(a), y = versionKey(b);
    for (var i = 0; i < Math.max(x.length, y.length); i++) {
      if (x[i] === undefined) return 1;
      if (y[i] === undefined) return -1;
      if (x[i] !== y[i]) return x[i] < y[i] ? 1 : -1;
    }
    return 0;
  }
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }

  // ---------------------------------------------------------------- the data
  function Data(doc) {
    this.doc = doc;
    var c = doc.columns;
    this.col = {};
    for (var i = 0; i < c.length; i++) this.col[c[i]] = i;
    this.gpuArch = {};
    var self = this;
    doc.gpus.forEach(function (g) { self.gpuArch[g.name] = g.arch; });
    doc.archs.forEach(function (a) { self.gpuArch[a] = a; });
    this.archSets = doc.arch_sets.map(function (s) {
      var set = {};
      s.forEach(function (i) { set[doc.archs[i]] = true; });
      return set;
    });
    // the flavor control's values → the flavors (bit indexes of a row's "flavors") they allow
    var bit = {};
    doc.flavors.forEach(function (f, i) { bit[f.flavor] = i; });
    this.choice = {};
    doc.flavor_choices.forEach(function (c) {
      self.choice[c.value] = c.flavors.map(function (f) { return bit[f]; });
    });
  }
  Data.prototype.value = function (row, name) {
    var a = this.doc.axes;
    switch (name) {
      case "framework_version": return a.framework_version[row[this.col.framework_version]][1];
      case "tier": return a.tier[row[this.col.tier]];
      default: return a[name][row[this.col[name]]];
    }
  };
  Data.prototype.fields = function (row) {
    var self = this, out = {};
    ["framework", "framework_version", "torch", "cuda", "python", "os", "tier"].forEach(
      function (n) { out[n] = self.value(row, n); });
    return out;
  };
  // the combination id, as envgen.resolve.combination.combination_id builds it
  Data.prototype.id = function (f) {
    return f.framework + "-" + f.framework_version + "-torch" + f.torch + "-cu" +
      f.cuda.replace(".", "") + "-py" + f.python + "-" + f.os.replace("-", "") + "-" +
      this.doc.platform.split("-").slice(1).join("-");
  };
  // as envgen.results.selector.make_command with the flavor that makes the row, plus the
  // choices that change the result and are not in the row: the GPU (the ops are built for
  // its architecture)
  Data.prototype.command = function (f, flavor, sel) {
    return "envgen make --framework " + quote(f.framework) + " --framework-version " +
      quote(f.framework_version) + " --torch " + quote(f.torch) + " --cuda " + quote(f.cuda) +
      " --python " + quote(f.python) + " --os " + quote(f.os) + " --flavor " + quote(flavor) +
      this.gpuFlag(sel || {});
  };
  // the first flavor the selection allows that makes the row (on the chosen GPU: with
  // os-package the OS's nvcc builds the ops, so its own architectures count), or null
  Data.prototype.flavorOf = function (row, sel) {
    var allowed = this.choice[sel.flavor || ""], bits = row[this.col.flavors];
    var arch = sel.gpu ? this.gpuArch[sel.gpu] : null;
    for (var i = 0; allowed && i < allowed.length; i++) {
      var b = allowed[i], f = this.doc.flavors[b].flavor;
      if (!(bits & (1 << b))) continue;
      if (arch) {
        var s = row[f === "os-package" ? this.col.os_package_arch_set : this.col.arch_set];
        if (s < 0 || !this.archSets[s][arch]) continue;
      }
      return f;
    }
    return null;
  };
  Data.prototype.gpuFlag = function (sel) {
    if (!sel.gpu) return "";
    return (this.doc.archs.indexOf(sel.gpu) >= 0 ? " --gpu-arch " : " --gpu ") + quote(sel.gpu);
  };
  // the values of filter ``name`` the data has (framework_version: of the chosen framework)
  Data.prototype.known = function (name, sel) {
    if (name === "tier") return this.doc.axes.tier.slice();
    if (name === "flavor") return Object.keys(this.choice);
    if (name === "gpu") return this.doc.archs.concat(this.doc.gpus.map(function (g) { return g.name; }));
    return this.options(name, {framework: sel.framework}).map(function (o) { return o.value; });
  };
  // ``anyFlavor``: as `envgen resolve` without --flavor (the GPU judged with torch's nvcc)
  Data.prototype.matches = function (row, sel, anyFlavor) {
    for (var name in sel) {
      var want = sel[name];
      if (name === "flavor") {
        continue;
      } else if (name === "gpu") {
        var s = row[this.col.arch_set];
        if (anyFlavor && (s < 0 || !this.archSets[s][this.gpuArch[want]])) return false;
      } else if (name === "tier") {
        if (row[this.col.tier] < this.doc.axes.tier.indexOf(want)) return false;
      } else if (this.value(row, name) !== want) {
        return false;
      }
    }
    return anyFlavor || this.flavorOf(row, sel) !== null;
  };
  Data.prototype.filter = function (sel, anyFlavor) {
    var self = this;
    return this.doc.rows.filter(function (r) { return self.matches(r, sel, anyFlavor); });
  };
  Data.prototype.first = function (sel) {
    var rows = this.doc.rows;
    for (var i = 0; i < rows.length; i++) if (this.matches(rows[i], sel)) return rows[i];
    return null;
  };
  // the options of one control: the values present in the rows the other filters leave
  Data.prototype.options = function (name, sel) {
    var doc = this.doc, self = this, seen = {}, out = [];
    if (name === "tier") {
      return doc.tiers.map(function (t) {
        return {value: t.tier, label: "≥ " + t.tier + " " + t.label, title: t.meaning};
      });
    }
    if (name === "flavor") { // the default ("") is the control's first option
      return doc.flavor_choices.filter(function (c) { return c.value; })
        .map(function (c) { return {value: c.value, label: c.label}; });
    }
    if (name === "gpu") {
      doc.archs.forEach(function (a) {
        var names = doc.gpus.filter(function (g) { return g.arch === a; })
          .map(function (g) { return g.name; });
        out.push({value: a, label: a + (names.length ? " (" + names.join(", ") + ")" : "")});
      });
      doc.gpus.forEach(function (g) { out.push({value: g.name, label: g.name + " (" + g.arch + ")"}); });
      return out;
    }
    var values = name === "framework_version" ? doc.axes.framework_version
      .filter(function (p) { return !sel.framework || p[0] === sel.framework; })
      .map(function (p) { return p[1]; }) : doc.axes[name].slice();
    values.forEach(function (v) {
      if (seen[v]) return;
      seen[v] = true;
      var label = v;
      if (name === "framework_version" && !sel.framework) {
        label = doc.axes.framework_version.filter(function (p) { return p[1] === v; })
          .map(function (p) { return p[0] + " " + p[1]; }).join(", ");
      }
      out.push({value: v, label: label});
    });
    if (name !== "framework" && name !== "os") out.sort(function (a, b) { return newestFirst(a.value, b.value); });
    return out;
  };

  // ---------------------------------------------------------------- the selection
  function readSelection() {
    var params = new URLSearchParams(location.search), sel = {};
    FILTERS.forEach(function (n) { if (params.get(n)) sel[n] = params.get(n); });
    return sel;
  }
  function writeSelection(sel) {
    var params = new URLSearchParams();
    FILTERS.forEach(function (n) { if (sel[n]) params.set(n, sel[n]); });
    var q = params.toString();
    history.replaceState(null, "", location.pathname + (q ? "?" + q : "") + location.hash);
  }
  // a value in a shell command, quoted as shlex.quote (envgen.shellcmd) quotes it
  function quote(v) {
    v = String(v);
    if (v && /^[A-Za-z0-9@%+=:,.\/_-]+$/.test(v)) return v;
    return "'" + v.replace(/'/g, "'\"'\"'") + "'";
  }
  // every choice as `envgen resolve` flags (the data's own names for the GPU); the flavor
  // when it is one flavor resolve can take (os-package needs --os)
  function flags(data, sel) {
    var map = {framework: "--framework", framework_version: "--framework-version",
      cuda: "--cuda", torch: "--torch", python: "--python", os: "--os"};
    var out = Object.keys(map).filter(function (n) { return sel[n]; })
      .map(function (n) { return map[n] + " " + quote(sel[n]); }).join(" ");
    var one = sel.flavor && data.choice[sel.flavor].length === 1 ? sel.flavor : null;
    if (one && (one !== "os-package" || sel.os)) out += " --flavor " + quote(one);
    out += data.gpuFlag(sel);
    if (sel.tier && sel.tier !== "T0" && sel.tier !== "T1") out += " --min-tier " + quote(sel.tier);
    return out.trim();
  }

  // ---------------------------------------------------------------- rendering
  function copyButton(text, what) {
    var code = el("code", {"data-command": text, text: text});
    var button = el("button", {type: "button", "class": "envgen-copy",
      "aria-label": "Copy the " + what + " command", text: "Copy"});
    button.addEventListener("click", function () {
      copy(text).then(function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 1500);
      }, function () { button.textContent = "Select and copy"; });
    });
    return el("div", {"class": "envgen-command"}, [code, button]);
  }
  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) { // http:// pages: the older way
      var area = el("textarea", {readonly: "", "aria-hidden": "true"});
      area.value = text;
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand("copy");
      document.body.removeChild(area);
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }
  function rowElement(data, row, note, sel) {
    var doc = data.doc, f = data.fields(row), id = data.id(f), flavor = data.flavorOf(row, sel);
    var tier = doc.tiers[row[data.col.tier]];
    var ev = row[data.col.evidence] >= 0 ? doc.evidence[row[data.col.evidence]] : null;
    var tierCell = el("td", {"class": "envgen-tier"}, [
      el("span", {"class": "envgen-badge envgen-" + tier.tier, title: tier.meaning,
        text: tier.tier + " " + tier.label})]);
    if (ev) tierCell.appendChild(el("div", {"class": "envgen-status", text: ev.status + (ev.note ? " (" + ev.note + ")" : "")}));
    var evidence = el("td", {"class": "envgen-evidence"});
    if (ev) {
      ev.records.forEach(function (r) {
        evidence.appendChild(el("a", {href: new URL(r.href, siteRoot).href,
          title: r.machine, text: r.tier + (r.status === "pass" ? " " : " failed ") + r.date}));
        evidence.appendChild(document.createTextNode(" "));
      });
    } else {
      evidence.appendChild(el("span", {"class": "envgen-none", text: "none yet"}));
    }
    var commands = el("td", {"class": "envgen-commands"}, [copyButton(data.command(f, flavor, sel), "envgen make")]);
    if (ev && ev.image) {
      commands.appendChild(copyButton("docker pull " + ev.image, "docker pull"));
    }
    var first = el("td", {}, [el("strong", {text: f.framework + " " + f.framework_version})]);
    if (note) first.appendChild(el("div", {"class": "envgen-near", text: note}));
    var cells = [tierCell, first, el("td", {text: f.torch}), el("td", {text: f.cuda}),
      el("td", {text: f.python}), el("td", {text: f.os}), evidence, commands];
    ["Tier", "Framework", "torch", "CUDA", "Python", "OS", "Evidence", "Commands"].forEach(
      function (label, i) { cells[i].setAttribute("data-label", label); }); // phone layout
    return el("tr", {"data-combination": id, "data-tier": tier.tier, "data-flavor": flavor}, cells);
  }

  function Selector(root, data) {
    this.root = root;
    this.data = data;
    this.controls = {};
    this.shown = PAGE;
    var self = this;
    root.querySelectorAll("[data-filter]").forEach(function (c) {
      self.controls[c.getAttribute("data-filter")] = c;
      c.addEventListener("change", function () {
        if (c.getAttribute("data-filter") === "framework") self.controls.framework_version.value = "";
        self.shown = PAGE;
        self.update(true);
      });
    });
    this.count = root.querySelector("[data-count]");
    this.flavorNote = root.querySelector("[data-flavor-note]");
    this.empty = root.querySelector("[data-empty]");
    this.body = root.querySelector("[data-rows]");
    this.more = root.querySelector("[data-more]");
    this.reset = root.querySelector("[data-reset]");
    this.more.addEventListener("click", function () { self.shown += PAGE; self.update(false); });
    this.reset.addEventListener("click", function () {
      FILTERS.forEach(function (n) { self.controls[n].value = ""; });
      self.shown = PAGE;
      self.update(true);
    });
    var subset = root.querySelector("[data-subset]"), n = data.doc.subset;
    if (subset) {
      subset.textContent = "The data: " + n.rows.toLocaleString("en") + " rows, the newest patch " +
        "per framework and torch minor of the " + n.feasible.toLocaleString("en") + " feasible " +
        "combinations, and every combination with records (" + n.recorded + ", " +
        n.not_feasible + " of them no longer feasible).";
    }
    var sel = readSelection();
    this.fill(sel);
    FILTERS.forEach(function (n) { if (sel[n]) self.controls[n].value = sel[n]; });
    this.update(false);
  }
  Selector.prototype.selection = function () {
    var sel = {}, self = this;
    FILTERS.forEach(function (n) { if (self.controls[n].value) sel[n] = self.controls[n].value; });
    return sel;
  };
  Selector.prototype.fill = function (sel) {
    var self = this;
    FILTERS.forEach(function (n) {
      var c = self.controls[n], keep = sel[n] !== undefined ? sel[n] : c.value;
      while (c.options.length > 1) c.remove(1);
      if (n === "flavor") c.options[0].textContent = self.data.doc.flavor_choices[0].label;
      self.data.options(n, sel).forEach(function (o) {
        var opt = el("option", {value: o.value, text: o.label});
        if (o.title) opt.title = o.title;
        c.appendChild(opt);
      });
      if (keep && !Array.prototype.some.call(c.options, function (o) { return o.value === keep; })) {
        c.appendChild(el("option", {value: keep, text: keep + " (not in the data)"}));
      }
      c.value = keep || "";
    });
  };
  Selector.prototype.update = function (push) {
    var sel = this.selection();
    this.fill(sel);
    sel = this.selection();
    if (push) writeSelection(sel);
    this.describeFlavor(sel);
    var rows = this.data.filter(sel), self = this;
    this.body.textContent = "";
    this.empty.hidden = rows.length > 0;
    this.empty.textContent = "";
    var unknown = Object.keys(sel).filter(function (n) {
      return self.data.known(n, sel).indexOf(sel[n]) < 0;
    });
    if (unknown.length) { // an edited link: say so, never pretend the value exists
      this.empty.hidden = false;
      this.empty.appendChild(el("h3", {text: "Unknown value"}));
      unknown.forEach(function (n) {
        self.empty.appendChild(el("p", {"data-unknown": n, text: "unknown value: " +
          n.replace("_", " ") + " " + JSON.stringify(sel[n]) + " is not in the data; " +
          "choose one from the list."}));
      });
      this.count.textContent = "No combination matches: unknown value.";
      this.more.hidden = true;
      return;
    }
    if (!rows.length) {
      this.explain(sel);
      this.count.textContent = "No combination matches this selection.";
      this.more.hidden = true;
      return;
    }
    rows.slice(0, this.shown).forEach(function (r) { self.body.appendChild(rowElement(self.data, r, null, sel)); });
    var total = this.data.doc.rows.length;
    this.count.textContent = rows.length.toLocaleString("en") + " of " + total.toLocaleString("en") +
      " combinations" + (rows.length > this.shown ? ", the best " + this.shown + " shown" : "") + ".";
    this.more.hidden = rows.length <= this.shown;
  };
  // what the chosen flavor builds with; conda explained when it is not chosen (it needs
  // conda-forge, or a mirror of it); what each flavor installs on request
  Selector.prototype.describeFlavor = function (sel) {
    var doc = this.data.doc, box = this.flavorNote, value = sel.flavor || "";
    if (!box) return;
    box.textContent = "";
    var choice = doc.flavor_choices.filter(function (c) { return c.value === value; })[0];
    if (!choice) return; // an unknown value: the explanation box says so
    var chosen = doc.flavors.filter(function (f) { return choice.flavors.indexOf(f.flavor) >= 0; });
    box.appendChild(el("p", {"data-flavor-choice": value, text: "Flavor: " + choice.label + ". " +
      chosen.map(function (f) { return f.flavor + " builds with " + f.covers; }).join("; ") +
      (chosen.length > 1 ? ". Each row's command names the flavor that makes it." : ".")}));
    doc.flavors.forEach(function (f) {
      if (f.flavor !== "conda" || choice.flavors.indexOf("conda") >= 0) return;
      box.appendChild(el("p", {"data-flavor": f.flavor, text: f.flavor + " (not in this " +
        "choice) builds with " + f.covers + "; it needs " + f.needs + "."}));
    });
    var list = el("ul", {"class": "envgen-flavors"});
    doc.flavors.forEach(function (f) {
      list.appendChild(el("li", {}, [el("strong", {text: f.label}),
        document.createTextNode(": " + f.meaning + ". It builds with " + f.covers +
          ", and needs " + f.needs + ". "), sourceBox(f.source)]));
    });
    box.appendChild(el("details", {}, [el("summary", {text: "What each flavor installs"}), list]));
  };
  // the sources a reason or fact quotes (file lines, citations): shown only on request
  function sourceBox(sources) {
    if (!sources || !sources.length) return null;
    var list = el("ul", {});
    sources.forEach(function (text) {
      var item = el("li", {}), code = el("code", {});
      String(text).split(/(https?:\/\/[^\s;)]+)/).forEach(function (part, i) {
        code.appendChild(i % 2 ? el("a", {href: part, rel: "nofollow noopener", text: part})
          : document.createTextNode(part));
      });
      item.appendChild(code);
      list.appendChild(item);
    });
    return el("details", {"class": "envgen-source"}, [el("summary", {text: "source"}), list]);
  }
  // one of the resolver's reasons: its words first, then the rule, its sources on request
  function reasonItem(r) {
    return el("li", {"data-reason": r.rule}, [el("strong", {text: r.example}),
      document.createTextNode(" — " + r.meaning + " (rule " + r.rule + "; it ruled out " +
        r.removed.toLocaleString("en") + " candidate combinations of all releases) "),
      sourceBox(r.source)]);
  }
  // why a selection has no row: the flavor when the other choices have rows, else a
  // pre-generated explanation of a pair of its values; then the nearest rows (the
  // selection less one value, as `envgen resolve` relaxes a request)
  Selector.prototype.explain = function (sel) {
    var data = this.data, doc = data.doc, box = this.empty, self = this;
    box.appendChild(el("h3", {text: "Why nothing matches"}));
    var loose = data.filter(sel, true);
    if (loose.length) {
      this.explainFlavor(sel, loose);
    } else {
      this.explainPair(sel);
    }
    var near = [];
    Object.keys(sel).forEach(function (n) {
      if (n === "flavor" && sel.flavor === "any") return; // every flavor is already allowed
      var rest = {};
      Object.keys(sel).forEach(function (m) { if (m !== n) rest[m] = sel[m]; });
      if (n === "flavor") rest.flavor = "any";
      var r = data.first(rest);
      if (r && near.every(function (x) { return x.row !== r; })) {
        var note = n === "flavor" ? "with --flavor " + data.flavorOf(r, rest) + " instead"
          : "without " + n.replace("_", " ") + " " + sel[n];
        near.push({row: r, note: note, sel: rest});
      }
    });
    if (!sel.flavor) { // the default: the rows another flavor makes are the nearest too
      var other = Object.assign({}, sel, {flavor: "any"}), r = data.first(other);
      if (r && near.every(function (x) { return x.row !== r; })) {
        near.push({row: r, note: "with --flavor " + data.flavorOf(r, other), sel: other});
      }
    }
    if (near.length) {
      box.appendChild(el("p", {text: "The nearest rows:"}));
      near.slice(0, 3).forEach(function (x) { self.body.appendChild(rowElement(data, x.row, x.note, x.sel)); });
    }
  };
  // the other choices have rows, but no flavor of this choice makes them: say what each
  // chosen flavor builds with, and which other flavor makes how many of them
  Selector.prototype.explainFlavor = function (sel, loose) {
    var data = this.data, doc = data.doc, box = this.empty, self = this;
    var choice = doc.flavor_choices.filter(function (c) { return c.value === (sel.flavor || ""); })[0];
    var list = el("ul", {"class": "envgen-reasons"});
    var covers = doc.flavors.filter(function (f) { return choice.flavors.indexOf(f.flavor) >= 0; });
    var builds = covers.map(function (f) { return f.flavor + " builds with " + f.covers; }).join("; ");
    var noGpu = {};
    Object.keys(sel).forEach(function (n) { if (n !== "gpu") noGpu[n] = sel[n]; });
    var withoutGpu = sel.gpu ? data.filter(noGpu).length : 0;
    var words = withoutGpu ? // the flavor makes them, but its nvcc (the OS's) misses the GPU
      "The CUDA compiler " + choice.flavors.join(" or ") + " builds these with cannot target " +
        sel.gpu + (data.gpuArch[sel.gpu] !== sel.gpu ? " (" + data.gpuArch[sel.gpu] + ")" : "") +
        ": " + builds + "."
      : "No combination with these choices can be made with " + choice.flavors.join(" or ") +
        ": " + builds + ".";
    var item = el("li", {"data-reason": "flavor"}, [el("strong", {text: words}),
      document.createTextNode(" " + (withoutGpu ? withoutGpu.toLocaleString("en") + " of them " +
        "without the GPU; " : "") + loose.length.toLocaleString("en") + " combination" +
        (loose.length > 1 ? "s match" : " matches") + " these choices with any flavor" +
        (sel.gpu ? " (the GPU judged with torch's own CUDA compiler)" : "") + ".")]);
    var sources = [];
    covers.forEach(function (f) { sources = sources.concat(f.source); });
    var box2 = sourceBox(sources);
    if (box2) item.appendChild(box2);
    list.appendChild(item);
    box.appendChild(list);
    var others = doc.flavors.filter(function (f) { return choice.flavors.indexOf(f.flavor) < 0; });
    var offered = 0;
    others.forEach(function (f) {
      var one = Object.assign({}, sel, {flavor: f.flavor});
      var n = loose.filter(function (r) { return data.flavorOf(r, one) !== null; }).length;
      if (!n) return;
      offered++;
      var button = el("button", {type: "button", "data-flavor-switch": f.flavor,
        text: "Show the " + n.toLocaleString("en") + " row" + (n > 1 ? "s" : "") + " " + f.flavor + " makes"});
      button.addEventListener("click", function () {
        self.controls.flavor.value = f.flavor;
        self.shown = PAGE;
        self.update(true);
      });
      box.appendChild(el("p", {}, [document.createTextNode(f.label + ": " + f.meaning + ". "), button]));
    });
    if (!offered) {
      box.appendChild(el("p", {text: "No flavor envgen knows makes them: " + doc.flavors.map(
        function (f) { return f.flavor + " builds with " + f.covers; }).join("; ") + "."}));
    }
    if (flags(data, sel).indexOf("--flavor") >= 0) {
      box.appendChild(el("p", {text: "The resolver's full explanation:"}));
      box.appendChild(copyButton("envgen resolve " + flags(data, sel), "envgen resolve"));
    }
  };
  // no row has the other choices either: a pre-generated explanation of a pair of values
  Selector.prototype.explainPair = function (sel) {
    var data = this.data, doc = data.doc, box = this.empty;
    var named = EXPLAINED.filter(function (n) { return sel[n]; });
    var found = null;
    for (var i = 0; i < named.length && !found; i++) {
      for (var j = i + 1; j < named.length && !found; j++) {
        var a = named[i], b = named[j];
        var va = a === "gpu" ? data.gpuArch[sel[a]] : sel[a];
        var vb = b === "gpu" ? data.gpuArch[sel[b]] : sel[b];
        found = doc.explanations[a + "=" + va + "&" + b + "=" + vb] || null;
      }
    }
    if (found) {
      // the rule about these choices first (envgen.results.selector orders them), in words;
      // the other rules behind "Other rules", each one's sources behind "source"
      var lead = found.reasons[0], list = el("ul", {"class": "envgen-reasons"});
      found.none.forEach(function (t) { list.appendChild(el("li", {text: t})); });
      if (lead) list.appendChild(reasonItem(lead));
      box.appendChild(list);
      if (found.reasons.length > 1) {
        var more = el("ul", {"class": "envgen-reasons"});
        found.reasons.slice(1).forEach(function (r) { more.appendChild(reasonItem(r)); });
        box.appendChild(el("details", {"class": "envgen-other"}, [el("summary", {text: "Other rules"}), more]));
      }
      box.appendChild(el("p", {text: "The resolver's full explanation:"}));
      box.appendChild(copyButton("envgen resolve " + flags(data, sel), "envgen resolve"));
    } else if (sel.tier) {
      box.appendChild(el("p", {text: "No combination with these choices has evidence at " +
        sel.tier + " or above yet. Lower the tier to see the combinations that resolve."}));
    } else {
      box.appendChild(el("p", {text: "Each pair of these choices exists, but no combination " +
        "has all of them. The resolver explains which rule removed the candidates:"}));
      box.appendChild(copyButton("envgen resolve " + flags(data, sel), "envgen resolve"));
    }
  };

  // the published images page (docs/images.md): every row whose evidence names one
  function listImages(root, data) {
    var doc = data.doc, body = root.querySelector("[data-rows]"), n = 0;
    doc.rows.forEach(function (row) {
      var e = row[data.col.evidence], ev = e >= 0 ? doc.evidence[e] : null;
      if (!ev || !ev.image) return;
      var f = data.fields(row), tier = doc.tiers[row[data.col.tier]];
      body.appendChild(el("tr", {"data-combination": data.id(f), "data-tier": tier.tier}, [
        el("td", {text: data.id(f)}), el("td", {text: tier.tier + " " + tier.label}),
        el("td", {}, [copyButton("docker pull " + ev.image, "docker pull")])]));
      n++;
    });
    root.querySelector("[data-count]").textContent = n ? n + " published image" + (n > 1 ? "s." : ".")
      : "No image has been published yet: every image so far was built on a developer machine " +
        "and kept local. The compatibility page shows what was built (tier T2).";
  }

  function load(root, what, ready) {
    var status = root.querySelector("[data-count]");
    status.textContent = "Loading the combinations…";
    fetch(new URL(root.getAttribute("data-src"), siteRoot)).then(function (r) {
      if (!r.ok) throw new Error(r.status + " " + r.statusText);
      return r.json();
    }).then(function (doc) {
      ready(new Data(doc));
      root.setAttribute("data-ready", "true");
    }).catch(function (e) {
      status.textContent = "Could not load " + what + " (" + e.message + ").";
      throw e;
    });
  }

  function start() {
    var root = document.getElementById("envgen-selector");
    if (root) load(root, "the combinations", function (data) { root.selector = new Selector(root, data); });
    var images = document.getElementById("envgen-images");
    if (images) load(images, "the images", function (data) { listImages(images, data); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
