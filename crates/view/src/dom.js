  // ---------- DOM helpers shared by every page (the leaderboard's too) ----------
  // All text goes through textContent or setAttribute, never innerHTML: data from
  // packages cannot become markup.
  var SVGNS = "http://www.w3.org/2000/svg";
  function el(tag, props) {
    var node = document.createElement(tag);
    setProps(node, props);
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }
  function sv(tag, props) {
    var node = document.createElementNS(SVGNS, tag);
    setProps(node, props);
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }
  // Bidirectional controls in data would reorder what is drawn after them
  // (`claude-\u202Eevil\u202C` reads "claude-live"): every one is shown as a marker
  // instead, so what a page shows is what the data holds.
  var BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
  function bidiSafe(s) {
    return String(s).replace(BIDI, function (c) {
      return "\u27E8U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "\u27E9";
    });
  }
  function setProps(node, props) {
    if (!props) return;
    Object.keys(props).forEach(function (k) {
      var v = props[k];
      if (v === null || v === undefined || v === false) return;
      if (k === "text") node.textContent = bidiSafe(v);
      else if (k === "title" || k === "aria-label") node.setAttribute(k, bidiSafe(v));
      else node.setAttribute(k, String(v));
    });
  }
  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    if (typeof child === "string" || typeof child === "number") node.appendChild(document.createTextNode(bidiSafe(child)));
    else node.appendChild(child);
  }
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  function isStr(x) { return typeof x === "string"; }
  function arr(x) { return Array.isArray(x) ? x : []; }
