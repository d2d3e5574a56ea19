#!/usr/bin/env node
// Headless-Chromium check of a page rendered from crates/view/src/page.html.
//
// usage: node check_page.mjs MODE URL SCREENSHOT.png
//   MODE      episode | list | index | navigate | timing | live | compare
//             (live: an index or list page served by `epistore ui`; after it renders,
//              "rendered" goes to stderr, then the check waits, up to 60 s, for the page
//              to draw a newer snapshot of the store by itself, and reports both)
//   URL       a file path, a file:// URL or an http(s):// URL
//             (navigate: a leaderboard page whose entries link to their episode lists
//              with a.entry-episodes)
//
// env: EPISTORE_WIDTH   window width in px (default 1280)
//      EPISTORE_FIND    episode mode: type this into the step search and report the steps it keeps
//      PLAYWRIGHT_CORE  path to the playwright-core package (directory or entry file);
//                       default: import('playwright-core')
//      CHROMIUM         Chromium executable; default /usr/bin/chromium
//
// Prints one JSON object on stdout. It always carries `ok`, `console` (console errors and
// warnings, and page errors) and `requests` (every request that leaves the page's own
// origin: for file:// pages any request that is not file: or data:, for http pages any
// request to another origin; such requests are also aborted), plus the mode's fields.
// `ok` is false when console messages, page errors or foreign requests were seen, or the
// page did not finish rendering, or the DOM contradicts the embedded DATA (`failures`
// says what). Exit status: 0 when ok, 1 when not ok or on any thrown error (message on
// stderr), 2 on usage errors. A full-page screenshot is written to SCREENSHOT.png.

import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { launchChromium, recordConsole } from "./playwright.mjs";

const MODES = ["episode", "list", "index", "navigate", "timing", "live", "compare"];
const [mode, target, shotArg] = process.argv.slice(2);
if (!MODES.includes(mode) || !target || !shotArg) {
  process.stderr.write(`usage: node check_page.mjs ${MODES.join("|")} URL SCREENSHOT.png\n`);
  process.exit(2);
}
const shotPath = resolve(shotArg);
// EPISTORE_WIDTH: the window's width in px (default 1280; 400 for a phone)
const WIDTH = Number(process.env.EPISTORE_WIDTH || 1280);
// EPISTORE_FIND (episode mode): a query typed into the step search once the page is drawn
const FIND = process.env.EPISTORE_FIND || "";

function toUrl(t) {
  if (/^(file|https?):/i.test(t)) return t;
  const p = resolve(t);
  if (!existsSync(p)) throw new Error(`page not found: ${p}`);
  return pathToFileURL(p).href;
}


const consoleMessages = [];
const requests = [];
const failures = [];
const fail = (m) => failures.push(m);

let browser;
let result;
try {
  const url = toUrl(target);
  const pageOrigin = new URL(url);
  const isFile = pageOrigin.protocol === "file:";
  // true when a request stays with the page: file:/data: for file pages, same origin for http
  const local = (u) => {
    let x;
    try { x = new URL(u); } catch { return false; }
    if (x.protocol === "data:") return true;
    if (isFile) return x.protocol === "file:";
    return x.origin === pageOrigin.origin;
  };

  browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: WIDTH, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  recordConsole(page, consoleMessages);
  page.on("pageerror", (err) => consoleMessages.push({ type: "pageerror", text: String(err && err.stack ? err.stack : err) }));
  page.on("request", (req) => { if (!local(req.url())) requests.push({ url: req.url(), method: req.method() }); });
  // nothing leaves the machine, even if the page tried
  await context.route((u) => !local(u.href), (route) => route.abort("blockedbyclient"));

  const waitRendered = async (what) => {
    await page.waitForFunction(() => document.body && document.body.hasAttribute("data-rendered"), null, { timeout: 30_000 })
      .catch(() => fail(`${what}: page never set body[data-rendered]`));
    const r = await page.evaluate(() => document.body.getAttribute("data-rendered"));
    if (r !== "ok") fail(`${what}: body[data-rendered] is ${JSON.stringify(r)}, expected "ok"`);
  };
  const kindOf = () => page.evaluate(() => (window.EPISTORE_PAGE && window.EPISTORE_PAGE.kind) || null);

  const t0 = Date.now();
  await page.goto(url, { waitUntil: "load", timeout: 60_000 });
  if (mode !== "navigate") await waitRendered(mode);
  const loadWallMs = Date.now() - t0;

  if (mode === "episode") result = await checkEpisode(page);
  else if (mode === "list") result = await checkList(page);
  else if (mode === "index") result = await checkIndex(page);
  else if (mode === "navigate") result = await checkNavigate(page, url, waitRendered, kindOf);
  else if (mode === "live") result = await checkLive(page, waitRendered);
  else if (mode === "compare") result = await checkCompare(page);
  else result = await checkTiming(page, loadWallMs);

  if (!["navigate", "timing", "live"].includes(mode) && result.kind !== mode) fail(`DATA.kind is ${JSON.stringify(result.kind)}, expected ${JSON.stringify(mode)}`);
  if (mode === "timing" && result.kind !== "episode") fail(`DATA.kind is ${JSON.stringify(result.kind)}, expected "episode"`);

  // no page is wider than the window (a long word in the data wraps), and no
  // bidirectional control reaches the text drawn (each shows as a marker)
  const docWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  if (docWidth > WIDTH + 2) fail(`the page is ${docWidth} px wide in a ${WIDTH} px window`);
  const bodyText = await page.evaluate(() => document.body.innerText);
  if (/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/.test(bodyText)) fail("a bidirectional control character is drawn");
  // text that should never leak from a template (outside what the data itself says: a
  // run's messages and outputs may well contain "undefined")
  const pageText = await page.evaluate(() => {
    const c = document.body.cloneNode(true);
    c.querySelectorAll("script, style, noscript, #steps, #sec-run, #details, pre, .diff").forEach((n) => n.remove());
    return c.textContent;
  });
  for (const bad of ["undefined", "NaN", "[object Object]", "EPISTORE_PAGE_"]) {
    if (pageText.includes(bad)) fail(`page text contains ${JSON.stringify(bad)}`);
  }

  await page.screenshot({ path: shotPath, fullPage: true });
  await context.close();
} catch (e) {
  if (browser) await browser.close().catch(() => {});
  process.stderr.write(`check_page: ERROR: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
}
await browser.close().catch(() => {});

result = { ok: false, mode, ...result, console: consoleMessages, requests, failures, screenshot: shotPath };
result.ok = consoleMessages.length === 0 && requests.length === 0 && failures.length === 0;
process.stdout.write(JSON.stringify(result, null, 2) + "\n");
if (!result.ok) {
  process.stderr.write("check_page: FAIL:\n" +
    [...consoleMessages.map((m) => `console ${m.type}: ${m.text}`), ...requests.map((r) => `request: ${r.method} ${r.url}`), ...failures]
      .map((s) => `  - ${s}\n`).join(""));
  process.exit(1);
}
process.stderr.write(`check_page: OK (${mode})\n`);

// =====================================================================================
// modes
// =====================================================================================

async function checkEpisode(page) {
  const out = await page.evaluate(() => {
    const text = (n) => (n ? n.innerText.replace(/\s+/g, " ").trim() : null);
    const D = window.EPISTORE_PAGE || {};
    // verdicts: the value shown in each data-field element (its .val child when it has one);
    // verdicts_text: the element's whole text (caption, value, notes)
    const verdicts = {}, verdicts_text = {};
    for (const f of ["claim", "posture", "admission", "correct", "label"]) {
      const n = document.querySelector(`#verdicts [data-field="${f}"]`);
      verdicts[f] = n ? (n.querySelector(".val") ? n.querySelector(".val").textContent.replace(/\s+/g, " ").trim() : text(n)) : null;
      verdicts_text[f] = text(n);
    }
    const checks = [...document.querySelectorAll("#checks tr.check-row")].map((tr) => ({
      check_id: tr.getAttribute("data-check-id") || text(tr.cells[1]),
      state: tr.getAttribute("data-state"),
      result: tr.getAttribute("data-result") || null,
      bound: tr.hasAttribute("data-bound") ? Number(tr.getAttribute("data-bound")) : null,
    }));
    const oracle = [...document.querySelectorAll('#timeline .mark[data-lane="oracle"]')].map((g) => ({
      seq: Number(g.getAttribute("data-seq")),
      result: g.getAttribute("data-result"),
      revision: g.hasAttribute("data-bound") ? Number(g.getAttribute("data-bound")) : Number(g.getAttribute("data-revision")),
      text: (() => { const l = g.querySelector(".mark-label"); return l ? (l.getAttribute("data-full") || l.textContent).trim() : g.textContent.trim(); })(),
    }));
    const artifacts = [...document.querySelectorAll("#artifacts tbody tr.artifact-row")].map((tr) => ({
      path: tr.getAttribute("data-path"),
      size: text(tr.cells[1]),
      content: text(tr.cells[2]),
    }));
    return {
      kind: D.kind ?? null,
      title: document.title,
      bands: document.querySelectorAll("#timeline .band").length,
      band_labels: [...document.querySelectorAll("#timeline .band")].map((b) => (b.querySelector(".band-label") || b).textContent.trim()),
      verdicts,
      verdicts_text,
      checks,
      marks: document.querySelectorAll("#timeline .mark").length,
      oracle,
      summary: text(document.getElementById("evidence-summary")),
      disagreement: text(document.getElementById("verdict-disagreement")),
      patch_lines: document.querySelectorAll("#patch .diff-line").length,
      artifacts,
      checks_total: (() => { const t = document.getElementById("checks"); return t && t.hasAttribute("data-rows-total") ? Number(t.getAttribute("data-rows-total")) : document.querySelectorAll("#checks tr.check-row").length; })(),
      reports: document.querySelectorAll("#reports .report").length,
      attempts_rows: document.querySelectorAll("#attempts tbody tr:not(.empty-row)").length,
      same_task_rows: document.querySelectorAll("#same-task tbody tr:not(.empty-row)").length,
      // The run in words, and whether each starts within the first screen.
      run_text: ["task-prompt", "final-message"].map((id) => {
        const node = document.getElementById(id);
        const pre = node && node.querySelector("pre");
        return {
          id,
          text: pre ? pre.textContent : (node ? text(node) : null),
          first_screen: !!node && node.getBoundingClientRect().top + window.scrollY < window.innerHeight,
        };
      }),
      // People's annotations as drawn: label, withdrawn or not, the whole line, and
      // whether the line lies within the window (a phone included).
      annotations: [...document.querySelectorAll("#annotations li.annotation")].map((li) => {
        const b = li.getBoundingClientRect();
        return {
          id: li.getAttribute("data-id"),
          label: text(li.querySelector(".annotation-label")),
          withdrawn: li.classList.contains("withdrawn"),
          text: text(li),
          within_window: b.left >= 0 && b.right <= window.innerWidth + 1,
        };
      }),
      _want: {
        annotations: Array.isArray(D.annotations) ? D.annotations.length : 0,
        bands: (typeof D.final_revision === "number" ? D.final_revision : 0) + 1,
        checks: D.traces && Array.isArray(D.traces.checks) ? D.traces.checks.length : 0,
      },
      _hooks: ["#task-prompt", "#final-message", "#verdicts", "#timeline", "#details", "#checks", "#patch", "#reports", "#artifacts", "#attempts", "#same-task"]
        .filter((s) => !document.querySelector(s)),
    };
  });
  const want = out._want;
  delete out._want;
  if (out._hooks.length) fail(`missing test hooks: ${out._hooks.join(", ")}`);
  delete out._hooks;
  if (out.annotations.length !== want.annotations) fail(`#annotations draws ${out.annotations.length} of ${want.annotations} annotations`);
  if (out.bands !== want.bands) fail(`${out.bands} .band, expected final_revision + 1 = ${want.bands}`);
  // the table may display only its first rows (data-rows-total says how many it holds)
  if (out.checks_total !== want.checks) fail(`#checks holds ${out.checks_total} rows, DATA has ${want.checks} checks`);
  if (out.checks.length > want.checks || (want.checks && !out.checks.length)) fail(`#checks displays ${out.checks.length} of ${want.checks} checks`);

  // the key columns of the checks table (result, state) lie within the window's width
  // on every row, however narrow the window (no column out of sight)
  out.key_cells_out_of_sight = await page.evaluate(() => {
    const out = [];
    document.querySelectorAll("#checks tr.check-row").forEach((tr) => {
      for (const label of ["result", "state"]) {
        const td = tr.querySelector(`td[data-label="${label}"]`);
        const b = td && td.getBoundingClientRect();
        if (!td || b.left < 0 || b.right > window.innerWidth + 1 || b.width === 0) out.push(`${tr.getAttribute("data-check-id") || "?"}: ${label}`);
      }
    });
    return out;
  });
  // a deep link (#seq-N) opened its record on load, and scrolled its step into view
  out.details_seq_on_load = await page.evaluate(() => {
    const d = document.getElementById("details");
    return d && d.hasAttribute("data-seq") ? Number(d.getAttribute("data-seq")) : null;
  });
  out.step_on_load = await page.evaluate(() => {
    const n = document.querySelector("#steps .step.is-selected");
    if (!n) return null;
    const b = n.getBoundingClientRect(), l = document.getElementById("steps").getBoundingClientRect();
    return { seq: Number(n.getAttribute("data-seq")), in_view: b.top < window.innerHeight && b.bottom > 0 && b.top < l.bottom && b.bottom > l.top };
  });
  // fit to width, when the timeline is wider than its view: after a click the whole
  // run is in the view
  // the overview strip: shown when the timeline is wider than its view
  out.overview_visible = await page.evaluate(() => {
    const o = document.getElementById("tl-overview");
    return !!o && !o.hidden && o.getBoundingClientRect().width > 0;
  });
  out.timeline_records = await page.evaluate(() => { const t = document.getElementById("timeline"); return t ? Number(t.getAttribute("data-records")) : null; });
  // labels drawn in the timeline never overlap one another (checked as drawn, and fitted)
  const overlaps = () => page.evaluate(() => {
    const boxes = [...document.querySelectorAll("#timeline text.mk-stale, #timeline text.mk-bound, #timeline text.mk-verdict, #timeline text.edit-label")]
      .filter((t) => t.getAttribute("visibility") !== "hidden")
      .map((t) => ({ c: t.getAttribute("class"), b: t.getBoundingClientRect() }))
      .filter((x) => x.b.width > 0);
    let n = 0;
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i].b, b = boxes[j].b;
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) n++;
    }
    return n;
  });
  out.label_overlaps = await overlaps();
  if (out.label_overlaps) fail(`${out.label_overlaps} pairs of timeline labels overlap`);
  const fitBtn = await page.$("#tl-fit:not([hidden])");
  if (fitBtn) {
    const widths = () => page.evaluate(() => {
      const sc = document.querySelector("#timeline .tl-scroll"), svg = document.querySelector("#timeline svg.tl-svg");
      return { view: sc.clientWidth, timeline: Number(svg.getAttribute("width")), marks: document.querySelectorAll("#timeline .mark").length };
    });
    const before = await widths();
    await fitBtn.click();
    const after = await widths();
    out.fit = { before, after, label_overlaps: await overlaps() };
    if (out.fit.label_overlaps) fail(`fitted: ${out.fit.label_overlaps} pairs of timeline labels overlap`);
    if (after.timeline > after.view + 1) fail(`fit to width left the timeline ${after.timeline} px wide in a ${after.view} px view`);
    await fitBtn.click();
  } else {
    out.fit = null;
  }
  // the steps in the window as loaded (the first screen, when the URL has no #seq)
  out.steps_in_view = await page.evaluate(() => [...document.querySelectorAll("#steps .step")]
    .filter((n) => { const b = n.getBoundingClientRect(); return b.top < window.innerHeight && b.bottom > 0; })
    .map((n) => Number(n.getAttribute("data-seq"))));
  // the step list: every step drawn so far, with its text
  const readSteps = () => page.evaluate(() => {
    const l = document.getElementById("steps");
    if (!l) return null;
    return {
      total: Number(l.getAttribute("data-total")),
      shown: Number(l.getAttribute("data-shown")),
      drawn: [...l.querySelectorAll(".step")].map((n) => ({ seq: Number(n.getAttribute("data-seq")), kind: n.getAttribute("data-kind"), text: n.innerText.slice(0, 4000) })),
      marks: l.querySelectorAll("mark").length,
      count: (document.getElementById("step-count") || {}).textContent ?? null,
    };
  });
  out.steps = await readSteps();
  if (!out.steps) fail("no #steps");
  if (FIND) {
    await page.fill("#step-search", FIND);
    await page.waitForFunction((q) => document.getElementById("steps").getAttribute("data-query") === q, FIND, { timeout: 5_000 })
      .catch(() => fail("the step search did not run"));
    out.find = { query: FIND, ...(await readSteps()) };
    delete out.find.total;
  }
  // click the first check mark (agent/human lane; else the oracle lane) and read #details
  const mark = (await page.$('#timeline .mark[data-lane="checks"]')) || (await page.$('#timeline .mark[data-lane="oracle"]'));
  if (mark) {
    await mark.click();
    await page.waitForFunction(() => {
      const d = document.getElementById("details");
      return d && d.hasAttribute("data-seq");
    }, null, { timeout: 5_000 }).catch(() => fail("#details did not fill after clicking a check mark"));
    out.details = await page.evaluate(() => document.getElementById("details").innerText.replace(/[ \t]+/g, " ").trim());
    out.url_after_click = page.url();
    out.details_seq = await page.evaluate(() => Number(document.getElementById("details").getAttribute("data-seq")));
  } else {
    out.details = null;
  }
  return out;
}

// compare: the aligned steps (rows, common prefix, first divergence) and the facts table
async function checkCompare(page) {
  const out = await page.evaluate(() => {
    const D = window.EPISTORE_PAGE || {};
    const t = document.getElementById("aligned");
    const first = document.getElementById("first-divergence");
    return {
      kind: D.kind ?? null,
      rows: t ? Number(t.getAttribute("data-rows")) : null,
      common: t ? Number(t.getAttribute("data-common")) : null,
      first: t ? Number(t.getAttribute("data-first")) : null,
      first_row: first ? [...first.cells].map((c) => c.innerText.replace(/\s+/g, " ").trim()) : null,
      divergence: (document.getElementById("divergence") || {}).innerText ?? null,
      differ: [...document.querySelectorAll("#compare-facts tr.differ")].map((r) => r.getAttribute("data-field")),
      links: [...document.querySelectorAll("#aligned a[href]")].length,
    };
  });
  if (out.rows === null) fail("no #aligned table");
  return out;
}

async function checkList(page) {
  const state = () => page.evaluate(() => {
    const rows = [...document.querySelectorAll("#episodes tr.episode-row")];
    return {
      ids: rows.map((r) => r.getAttribute("data-id")),
      visible: rows.filter((r) => !r.hidden && r.offsetParent !== null).length,
      shown: (document.getElementById("shown-count") || {}).textContent ?? null,
    };
  });
  const kind = await page.evaluate(() => (window.EPISTORE_PAGE && window.EPISTORE_PAGE.kind) || null);
  const want = await page.evaluate(() => {
    const D = window.EPISTORE_PAGE || {};
    // a long list comes as a table: column names once, a list of values per row
    if (D.table && Array.isArray(D.table.rows)) return D.table.rows.length;
    return Array.isArray(D.rows) ? D.rows.length : 0;
  });
  const total = await page.evaluate(() => { const t = document.getElementById("episodes"); return t && t.hasAttribute("data-rows-total") ? Number(t.getAttribute("data-rows-total")) : null; });
  const s0 = await state();
  // all rows, unless the table displays only its first ones (data-rows-total says how many it holds)
  if ((total ?? s0.ids.length) !== want || s0.ids.length > want || (want && !s0.ids.length)) fail(`#episodes has ${s0.ids.length} rows (holds ${total}), DATA has ${want}`);
  if (!(await page.$("#shown-count"))) fail("no #shown-count");

  // sort: click the "model" header (else the second header) and read that column
  let sorted_ok = null, sort_key = null;
  const th = (await page.$('#episodes thead th[data-key="model"]')) || (await page.$("#episodes thead th:nth-child(2)"));
  if (th && s0.ids.length) {
    sort_key = await th.getAttribute("data-key");
    const col = await th.evaluate((t) => [...t.parentNode.children].indexOf(t));
    const colValues = () => page.$$eval("#episodes tbody tr.episode-row", (trs, c) => trs.map((tr) => tr.cells[c].textContent.trim()), col);
    await th.click();
    const v1 = await colValues();
    const ids1 = (await state()).ids;
    await th.click();
    const v2 = await colValues();
    const dir1 = direction(v1), dir2 = direction(v2);
    sorted_ok = !!dir1 && !!dir2 && (new Set(v1).size < 2 || dir1 !== dir2 || ids1.join() !== s0.ids.join());
    if (!sorted_ok) fail(`clicking the ${sort_key} header did not sort the rows: ${JSON.stringify(v1)} then ${JSON.stringify(v2)}`);
  }

  // filter by the first row's id
  let filtered = null;
  const input = await page.$("#filter") || await page.$('input[type="search"]');
  if (input && s0.ids.length) {
    await input.fill("");
    await input.type(s0.ids[0]);
    const s1 = await state();
    filtered = s1.visible;
    if (filtered < 1) fail(`filtering by ${s0.ids[0]} hid every row`);
    if (!String(s1.shown).startsWith(`${filtered} of`)) fail(`#shown-count says ${JSON.stringify(s1.shown)} with ${filtered} rows visible`);
    await input.fill("");
    await page.evaluate(() => document.getElementById("filter") && document.getElementById("filter").dispatchEvent(new Event("input")));
  }
  return { kind, title: await page.title(), rows: s0.ids.length, shown: s0.shown, ids: s0.ids, sort_key, sorted_ok, filtered };
}

async function checkIndex(page) {
  const out = await page.evaluate(() => {
    const D = window.EPISTORE_PAGE || {};
    const body = (id) => document.querySelectorAll(`#${id} tbody tr:not(.empty-row)`).length;
    return {
      kind: D.kind ?? null,
      title: document.title,
      headline_rows: body("headline"),
      cells_rows: body("cells"),
      leaderboards_rows: body("leaderboards"),
      // one per #cells row that links somewhere: the row's first link
      cell_links: [...document.querySelectorAll("#cells tbody tr")].map((tr) => tr.querySelector("a[href]")).filter(Boolean).map((a) => a.getAttribute("href")),
      _want: { cells: Array.isArray(D.cells) ? D.cells.length : 0, headline: D.headline && Array.isArray(D.headline.rows) ? D.headline.rows.length : 0,
        leaderboards: Array.isArray(D.leaderboards) ? D.leaderboards.length : 0 },
    };
  });
  const w = out._want;
  delete out._want;
  if (out.cells_rows !== w.cells) fail(`#cells has ${out.cells_rows} rows, DATA has ${w.cells}`);
  if (out.headline_rows !== w.headline) fail(`#headline has ${out.headline_rows} rows, DATA has ${w.headline}`);
  if (out.leaderboards_rows !== w.leaderboards) fail(`#leaderboards has ${out.leaderboards_rows} rows, DATA has ${w.leaderboards}`);
  return out;
}

async function checkNavigate(page, boardUrl, waitRendered, kindOf) {
  const out = { board_entries: 0, list_rows: null, list_shown: null, episode_kind: null, episode_title: null, episode_bands: null, back_to_board: false };
  const strip = (u) => u.replace(/#.*$/, "");
  out.board_entries = await page.$$eval("a.entry-episodes", (as) => as.length);
  out.board_howto = await page.evaluate(() => { const h = document.querySelector(".howto"); return h ? h.textContent : null; });
  out.board_header_titles = await page.$$eval("#leaderboard thead th", (ths) => Object.fromEntries(ths.map((th) => [th.getAttribute("data-key"), th.getAttribute("title")])));
  let entry = await page.$("a.entry-episodes");
  if (!entry) {
    fail("the leaderboard page has no a.entry-episodes; falling back to the first table link that leaves the page");
    entry = await page.$('#leaderboard a[href]:not([href^="#"])') || await page.$('a[href$=".html"]');
  }
  if (!entry) { fail("no entry link to follow"); return out; }
  // follow links in this tab
  await page.evaluate(() => document.querySelectorAll("a[target]").forEach((a) => a.removeAttribute("target")));
  out.board_href = await entry.getAttribute("href");

  const follow = async (handle, what) => {
    const before = strip(page.url());
    await Promise.all([
      page.waitForURL((u) => strip(u.href) !== before, { waitUntil: "load", timeout: 30_000 }),
      handle.click(),
    ]);
    await waitRendered(what);
  };

  await follow(entry, "list");
  out.list_url = page.url();
  const lk = await kindOf();
  if (lk !== "list") fail(`the entry link led to a page of kind ${JSON.stringify(lk)}, expected "list"`);
  out.list_rows = await page.$$eval("#episodes tr.episode-row", (n) => n.length);
  out.list_shown = await page.evaluate(() => (document.getElementById("shown-count") || {}).textContent ?? null);

  const ep = await page.$("#episodes tr.episode-row a[href]") || await page.$("#episodes a[href]");
  if (!ep) { fail("the list has no episode link"); return out; }
  await follow(ep, "episode");
  out.episode_url = page.url();
  out.episode_kind = await kindOf();
  out.episode_title = await page.title();
  out.episode_bands = await page.$$eval("#timeline .band", (n) => n.length);
  if (out.episode_kind !== "episode") fail(`the list's first link led to a page of kind ${JSON.stringify(out.episode_kind)}`);

  await page.goBack({ waitUntil: "load" });
  await page.goBack({ waitUntil: "load" });
  out.back_to_board = strip(page.url()) === strip(boardUrl) && (await page.$$eval("a.entry-episodes", (as) => as.length)) === out.board_entries;
  if (!out.back_to_board) fail(`two steps back landed on ${page.url()}, not the board`);
  return out;
}

async function checkTiming(page, loadWallMs) {
  const info = await page.evaluate(() => {
    const m = performance.getEntriesByName("epistore:rendered")[0];
    const D = window.EPISTORE_PAGE || {};
    const tl = document.getElementById("timeline");
    return {
      kind: D.kind ?? null,
      rendered_at_ms: m ? Math.round(m.startTime) : null,
      script_ms: window.EPISTORE_TIMING ? window.EPISTORE_TIMING.render_ms : null,
      checks_rows: document.querySelectorAll("#checks tr.check-row").length,
      checks_total: (() => { const t = document.getElementById("checks"); return t ? Number(t.getAttribute("data-rows-total")) : null; })(),
      records: tl ? Number(tl.getAttribute("data-records")) : null,
      virtual: tl ? tl.getAttribute("data-virtual") === "true" : null,
      marks_at_start: document.querySelectorAll("#timeline .mark").length,
    };
  });
  if (!(await page.$("#timeline .tl-scroll"))) { fail("no #timeline .tl-scroll to scroll"); return { kind: info.kind }; }

  // sweep the timeline to its end one viewport at a time, one frame each
  const sweep = await page.evaluate(async () => {
    const sc = document.querySelector("#timeline .tl-scroll");
    const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
    const t0 = performance.now();
    let steps = 0, worst = 0;
    while (sc.scrollLeft + sc.clientWidth < sc.scrollWidth - 1) {
      const s = performance.now();
      sc.scrollLeft += sc.clientWidth;
      await frame();
      await frame();
      worst = Math.max(worst, performance.now() - s);
      steps++;
      if (steps > 100000) break;
    }
    const total = performance.now() - t0;
    const fs = (window.EPISTORE_TIMING && window.EPISTORE_TIMING.timeline_frames) || null;
    const marks = document.querySelectorAll("#timeline .mark");
    const last = marks.length ? Math.max(...[...marks].map((g) => Number(g.getAttribute("data-idx")))) : -1;
    return { scroll_ms: Math.round(total), steps, draw: fs && { frames: fs.frames, avg_ms: Math.round(fs.total_ms / Math.max(1, fs.frames) * 100) / 100, max_ms: Math.round(fs.max_ms * 10) / 10 }, max_step_ms: Math.round(worst * 10) / 10, marks_in_dom: marks.length, last_idx: last, width: sc.scrollWidth };
  });
  // jump back to the start and measure until the first mark is drawn
  const jump = await page.evaluate(async () => {
    const sc = document.querySelector("#timeline .tl-scroll");
    const t0 = performance.now();
    sc.scrollLeft = 0;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r())));
    return { jump_ms: Math.round((performance.now() - t0) * 10) / 10, first_drawn: !!document.querySelector('#timeline .mark[data-idx="0"]') };
  });
  // click a mark and time the details panel
  const t = Date.now();
  const mk = await page.$("#timeline .mark");
  if (mk) await mk.click();
  const click_ms = Date.now() - t;
  if (info.records && sweep.last_idx !== info.records - 1) fail(`after scrolling to the end the last drawn record is #${sweep.last_idx}, expected #${info.records - 1}`);
  if (info.virtual && sweep.marks_in_dom >= info.records) fail("virtualised timeline keeps every mark in the DOM");
  if (!jump.first_drawn) fail("jumping back to the start did not redraw the first record");
  return {
    kind: info.kind,
    records: info.records,
    virtual: info.virtual,
    marks_in_dom: sweep.marks_in_dom,
    render_ms: info.rendered_at_ms ?? loadWallMs,
    script_ms: info.script_ms,
    load_wall_ms: loadWallMs,
    scroll_ms: sweep.scroll_ms,
    scroll_steps: sweep.steps,
    scroll_step_avg_ms: Math.round(sweep.scroll_ms / Math.max(1, sweep.steps) * 10) / 10,
    max_step_ms: sweep.max_step_ms,
    draw_per_frame: sweep.draw,
    checks_rows_displayed: info.checks_rows,
    checks_rows_total: info.checks_total,
    jump_ms: jump.jump_ms,
    click_ms,
    timeline_width_px: sweep.width,
  };
}

// "asc" / "desc" / null for a column of cell texts ("—" = null, always last)
function direction(vals) {
  const isNull = (v) => v === "" || v === "\u2014";
  const nums = vals.filter((v) => !isNull(v)).every((v) => /^-?[\d,]*\.?\d+$/.test(v));
  const cmp = (a, b) => nums ? Number(a.replace(/,/g, "")) - Number(b.replace(/,/g, ""))
    : a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  const mono = (dir) => {
    let seenNull = false, prev = null;
    for (const v of vals) {
      if (isNull(v)) { seenNull = true; continue; }
      if (seenNull) return false;
      if (prev !== null && cmp(v, prev) * dir < 0) return false;
      prev = v;
    }
    return true;
  };
  return mono(1) ? "asc" : mono(-1) ? "desc" : null;
}

/* live: the page follows the store without being reloaded */
async function checkLive(page, waitRendered) {
  const state = () => page.evaluate(() => {
    const d = window.EPISTORE_PAGE || {};
    return {
      kind: d.kind || null,
      snapshot: document.body.getAttribute("data-live-snapshot"),
      episodes: d.store ? d.store.episodes : (d.counts ? d.counts.episodes : null),
      navigations: performance.getEntriesByType("navigation").length,
      url: location.href,
    };
  });
  const before = await state();
  if (before.snapshot === null) fail("the page carries no live snapshot");
  process.stderr.write("rendered\n");
  await page.waitForFunction((s) => document.body.getAttribute("data-live-snapshot") !== s, before.snapshot, { timeout: 60_000 })
    .catch(() => fail("the page never drew a newer snapshot"));
  await waitRendered("live");
  const after = await state();
  if (after.url !== before.url) fail(`the page navigated: ${before.url} -> ${after.url}`);
  return { kind: after.kind, snapshots: [before.snapshot, after.snapshot], episodes: [before.episodes, after.episodes] };
}
