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
  function setProps(node, props) {
    if (!props) return;
    Object.keys(props).forEach(function (k) {
      var v = props[k];
      if (v === null || v === undefined || v === false) return;
      if (k === "text") node.textContent = String(v);
      else node.setAttribute(k, String(v));
    });
  }
  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    if (typeof child === "string" || typeof child === "number") node.appendChild(document.createTextNode(String(child)));
    else node.appendChild(child);
  }
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  function isStr(x) { return typeof x === "string"; }
  function arr(x) { return Array.isArray(x) ? x : []; }
