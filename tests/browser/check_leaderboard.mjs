#!/usr/bin/env node
// Headless-Chromium check of a rendered epistore leaderboard page.
//
// usage: node check_leaderboard.mjs PAGE.html SCREENSHOT.png
//
// env: PLAYWRIGHT_CORE  path to the playwright-core package (directory or entry file);
//                       default: import('playwright-core')
//      CHROMIUM         Chromium executable; default /usr/bin/chromium
//
// Prints a JSON summary on stdout. Exits 1 (with the reasons on stderr) when the
// page logs a console error or warning, throws, makes any non-file request, or
// when its DOM does not match the DATA embedded in it. Exit 2 on usage errors.

import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { launchChromium, recordConsole } from "./playwright.mjs";

const [pageArg, shotArg] = process.argv.slice(2);
if (!pageArg || !shotArg) {
  process.stderr.write("usage: node check_leaderboard.mjs PAGE.html SCREENSHOT.png\n");
  process.exit(2);
}
const pagePath = resolve(pageArg);
const shotPath = resolve(shotArg);
if (!existsSync(pagePath)) {
  process.stderr.write(`check_leaderboard: FAIL: page not found: ${pagePath}\n`);
  process.exit(1);
}


const failures = [];
const consoleMessages = [];
const pageErrors = [];
const badRequests = [];
const fail = (msg) => failures.push(msg);

const summary = {
  page: pagePath,
  screenshot: shotPath,
  ok: false,
};

let browser;
try {
  browser = await launchChromium();
  summary.browser = browser.version();
  // EPISTORE_WIDTH: the window's width in px (default 1200; 400 for a phone)
  const width = Number(process.env.EPISTORE_WIDTH || 1200);
  const context = await browser.newContext({ viewport: { width, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();

  recordConsole(page, consoleMessages);
  page.on("pageerror", (err) => pageErrors.push(String(err && err.stack ? err.stack : err)));
  page.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith("file:")) badRequests.push({ url, reason: "non-file request" });
  });
  page.on("requestfailed", (req) => {
    badRequests.push({ url: req.url(), reason: `failed: ${req.failure()?.errorText ?? "unknown"}` });
  });
  // Never let anything leave the machine, even if the page tried.
  await context.route(/^(?!file:)/, (route) => route.abort("blockedbyclient"));

  const url = pathToFileURL(pagePath).href;
  await page.goto(url, { waitUntil: "load", timeout: 30_000 });
  await page
    .waitForFunction(() => document.body && document.body.hasAttribute("data-rendered"), null, { timeout: 10_000 })
    .catch(() => fail("page never set body[data-rendered] (render did not finish)"));

  const title = await page.title();
  summary.title = title;
  const html = await page.content();
  if (title.includes("EPISTORE_LEADERBOARD_TITLE")) fail("title placeholder was not substituted");

  const data = await page.evaluate(() => window.EPISTORE_LEADERBOARD ?? null);
  if (!data || typeof data !== "object") {
    fail("window.EPISTORE_LEADERBOARD is not an object (DATA placeholder not substituted?)");
  } else {
    const rendered = await page.evaluate(() => document.body.getAttribute("data-rendered"));
    if (rendered !== "ok") fail(`body[data-rendered] is ${JSON.stringify(rendered)}, expected "ok"`);
    const entries = Array.isArray(data.entries) ? data.entries : [];
    const isNum = (x) => typeof x === "number" && Number.isFinite(x);
    summary.schema = data.schema ?? null;
    summary.entries = entries.length;

    // --- table rows ---
    const table = await page.$("table#leaderboard.sortable");
    if (!table) fail("no table#leaderboard.sortable");
    const rowLabels = () =>
      page.$$eval("table#leaderboard > tbody > tr", (trs) => trs.map((tr) => tr.getAttribute("data-label")));
    const labels0 = await rowLabels();
    summary.rows = labels0.length;
    if (labels0.length !== entries.length) fail(`table has ${labels0.length} body rows, DATA has ${entries.length} entries`);
    if (labels0.some((l) => l === null)) fail("a tbody row lacks data-label");
    const dataLabels = entries.map((e) => String(e.label));
    const sortedA = [...labels0].sort().join("\u0000");
    const sortedB = [...dataLabels].sort().join("\u0000");
    if (sortedA !== sortedB) fail(`row labels ${JSON.stringify(labels0)} do not match entry labels ${JSON.stringify(dataLabels)}`);
    // value, interval and tie group lie within the window on every row (no column out of sight)
    summary.key_cells_out_of_sight = await page.$$eval("table#leaderboard > tbody > tr", (trs) => {
      const out = [];
      for (const tr of trs) {
        for (const label of ["value", "interval", "tie group"]) {
          const td = tr.querySelector(`td[data-label="${label}"]`);
          const b = td && td.getBoundingClientRect();
          if (!td || b.left < 0 || b.right > window.innerWidth + 1 || b.width === 0) out.push(`${tr.getAttribute("data-label")}: ${label}`);
        }
      }
      return out;
    });
    // initial order follows rank
    const rankOf = new Map(entries.map((e) => [String(e.label), e.rank]));
    const initRanks = labels0.map((l) => rankOf.get(l));
    if (!monotone(initRanks, 1)) fail(`initial row order is not by rank: ${JSON.stringify(initRanks)}`);
    // NULL values render as NULL
    const nullLabels = entries.filter((e) => !isNum(e.value)).map((e) => String(e.label));
    for (const l of nullLabels) {
      const text = await page.$$eval("table#leaderboard > tbody > tr", (trs, l) => {
        const tr = trs.find((t) => t.getAttribute("data-label") === l);
        return tr ? tr.textContent : "";
      }, l);
      if (!text.includes("NULL")) fail(`row ${JSON.stringify(l)} has a null value but shows no NULL`);
    }

    // --- episode id lists ---
    const details = await page.$$eval("details[id^='episodes-']", (ds) =>
      ds.map((d) => ({ label: d.getAttribute("data-label"), ids: d.querySelectorAll("ol.ids li").length }))
    );
    summary.episode_lists = details.length;
    if (details.length !== entries.length) fail(`${details.length} episode-id <details>, expected ${entries.length}`);
    for (const e of entries) {
      const d = details.find((x) => x.label === String(e.label));
      const want = Array.isArray(e.episode_ids) ? e.episode_ids.length : 0;
      if (d && want > 0 && d.ids !== want) fail(`episode list for ${JSON.stringify(e.label)} has ${d.ids} ids, expected ${want}`);
    }

    // --- value chart ---
    const chart = await page.$("svg#chart-values");
    if (!chart) fail("no svg#chart-values");
    const points = await page.$$eval("svg#chart-values .point", (n) => n.length);
    const whiskers = await page.$$eval("svg#chart-values .whisker", (n) => n.length);
    const wantPoints = entries.filter((e) => isNum(e.value)).length;
    const wantWhiskers = entries.filter((e) => isNum(e.lo) && isNum(e.hi)).length;
    summary.points = points;
    summary.whiskers = whiskers;
    if (points !== wantPoints) fail(`chart has ${points} .point, expected ${wantPoints}`);
    if (whiskers !== wantWhiskers) fail(`chart has ${whiskers} .whisker, expected ${wantWhiskers}`);

    // --- evidence matrix ---
    const matrix = await page.$("#evidence-matrix");
    const wantMatrix = data.evidence_matrix !== null && data.evidence_matrix !== undefined;
    summary.evidence_matrix = !!matrix;
    if (!!matrix !== wantMatrix) fail(`#evidence-matrix ${matrix ? "present" : "absent"} but evidence_matrix is ${wantMatrix ? "non-null" : "null"}`);
    if (matrix && wantMatrix && Array.isArray(data.evidence_matrix.levels)) {
      const levelRows = await page.$$eval("#evidence-matrix tbody tr", (n) => n.length);
      if (levelRows !== data.evidence_matrix.levels.length)
        fail(`#evidence-matrix has ${levelRows} level rows, expected ${data.evidence_matrix.levels.length}`);
    }

    // --- revision curves ---
    const series = Array.isArray(data.revision_curves) ? data.revision_curves : [];
    summary.revision_series = series.length;
    if (series.length) {
      const cur = await page.$$eval("svg#revision-curves .curve-current", (n) => n.length);
      const ever = await page.$$eval("svg#revision-curves .curve-ever", (n) => n.length);
      summary.curves = { current: cur, ever };
      if (cur !== series.length) fail(`#revision-curves has ${cur} .curve-current, expected ${series.length}`);
      if (ever !== series.length) fail(`#revision-curves has ${ever} .curve-ever, expected ${series.length}`);
    } else {
      // Without oracle verdicts the section is left out, not drawn empty.
      if (await page.$("section#revisions")) fail("a revision-curves section although revision_curves is empty");
      if (await page.$("svg#revision-curves")) fail("svg#revision-curves present although revision_curves is empty");
      summary.revisions_section = false;
    }

    // --- pass@k and pass^k over k: drawn only where some task has two judged attempts ---
    const passK = Array.isArray(data.pass_k) ? data.pass_k : [];
    summary.pass_k_series = passK.length;
    if (passK.length) {
      const at = await page.$$eval("svg#pass-k-curves .curve-current", (n) => n.length);
      const hat = await page.$$eval("svg#pass-k-curves .curve-ever", (n) => n.length);
      if (at !== passK.length || hat !== passK.length)
        fail(`#pass-k-curves has ${at} pass@k and ${hat} pass^k lines, expected ${passK.length} each`);
    } else if (await page.$("section#pass-k")) {
      fail("a pass@k section although pass_k is empty");
    }
    // --- cost against the metric: one point per entry with a value and a known cost ---
    const costed = (Array.isArray(data.entries) ? data.entries : [])
      .filter((e) => typeof e.value === "number" && e.cost_per_episode && typeof e.cost_per_episode.value === "number");
    summary.cost_points = costed.length;
    if (costed.length >= 2) {
      const n = await page.$$eval("svg#cost-chart .cost-point", (g) => g.length);
      if (n !== costed.length) fail(`#cost-chart has ${n} points, expected ${costed.length}`);
    } else if (await page.$("section#cost")) {
      fail("a cost section although fewer than two entries have a cost");
    }
    // --- rank held: one cell per entry, a percentage or NULL ---
    const held = await page.$$eval("#leaderboard tbody tr", (rows) => rows.map((r) => {
      const i = [...r.closest("table").querySelectorAll("thead th")].findIndex((th) => th.dataset.key === "rank_stability");
      return i < 0 ? null : r.children[i].innerText.trim();
    }));
    if (held.some((t) => t === null || !(/^\d+%$/.test(t) || t === "NULL"))) fail(`rank held cells: ${JSON.stringify(held)}`);
    // --- what could not be tested is said in words ---
    const text = await page.evaluate(() => document.body.innerText);
    const ents = Array.isArray(data.entries) ? data.entries : [];
    if (data.comparison && data.comparison.family === 0 && ents.length > 1 && !text.includes("their order is untested"))
      fail("a board with no comparable pair does not say so");
    summary.single_cluster_entries = ents.filter((e) => e.clusters === 1).length;
    if (summary.single_cluster_entries && !text.includes("one task cluster: no interval"))
      fail("a single-cluster entry's interval is not labelled");
    // --- a pass-rate board says how errors count ---
    if (data.errors && !(await page.evaluate(() => document.body.innerText.includes("Errors"))))
      fail("a pass-rate board without its errors rule");

    // --- no leaked undefined/NaN ---
    const bodyText = await page.evaluate(() => document.body.innerText);
    for (const bad of ["undefined", "NaN", "[object Object]"]) {
      if (bodyText.includes(bad)) fail(`page text contains ${JSON.stringify(bad)}`);
    }
    if (/EPISTORE_LEADERBOARD_(TITLE|DATA)/.test(html.replace(/window\.EPISTORE_LEADERBOARD\b/g, "")))
      fail("a template placeholder is still in the page");

    // --- sorting by value ---
    const valueOf = new Map(entries.map((e) => [String(e.label), isNum(e.value) ? e.value : null]));
    const th = await findHeader(page, "value");
    if (!th) {
      fail('no "value" header in table#leaderboard');
    } else {
      await th.click();
      const l1 = await rowLabels();
      const s1 = await th.getAttribute("aria-sort");
      const dir1 = orderDirection(l1.map((l) => valueOf.get(l)));
      await th.click();
      const l2 = await rowLabels();
      const s2 = await th.getAttribute("aria-sort");
      const dir2 = orderDirection(l2.map((l) => valueOf.get(l)));
      summary.sort = { first: { aria_sort: s1, order: l1 }, second: { aria_sort: s2, order: l2 } };
      const nonNull = entries.filter((e) => isNum(e.value)).length;
      if (!dir1) fail(`after one click on "value" rows are not sorted by value (nulls last): ${JSON.stringify(l1)}`);
      if (!dir2) fail(`after a second click on "value" rows are not sorted by value (nulls last): ${JSON.stringify(l2)}`);
      const distinct = new Set(entries.filter((e) => isNum(e.value)).map((e) => e.value)).size;
      if (dir1 && dir2 && distinct > 1 && dir1 === dir2) fail(`second click on "value" did not reverse the order (${dir1} both times)`);
      const ariaWant = { asc: "ascending", desc: "descending" };
      if (dir1 && distinct > 1 && s1 !== ariaWant[dir1]) fail(`aria-sort after first click is ${JSON.stringify(s1)}, rows are ${ariaWant[dir1]}`);
      if (dir2 && distinct > 1 && s2 !== ariaWant[dir2]) fail(`aria-sort after second click is ${JSON.stringify(s2)}, rows are ${ariaWant[dir2]}`);
      const others = await page.$$eval("table#leaderboard thead th[aria-sort]", (n) => n.length);
      if (others !== 1) fail(`${others} header cells carry aria-sort, expected exactly 1`);
      if (nonNull > 1 && l1.join() === l2.join() && distinct > 1) fail("sorting twice left the same order");
      // the interaction itself must not have logged anything
    }
  }

  await page.screenshot({ path: shotPath, fullPage: true });
  await context.close();
} catch (e) {
  fail(`check crashed: ${e && e.stack ? e.stack : e}`);
} finally {
  if (browser) await browser.close().catch(() => {});
}

for (const m of consoleMessages) fail(`console ${m.type}: ${m.text}${m.url ? ` (${m.url}:${m.line})` : ""}`);
for (const e of pageErrors) fail(`page error: ${e}`);
for (const r of badRequests) fail(`request ${r.reason}: ${r.url}`);

summary.console = consoleMessages;
summary.page_errors = pageErrors;
summary.bad_requests = badRequests;
summary.failures = failures;
summary.ok = failures.length === 0;
process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
if (failures.length) {
  process.stderr.write(`check_leaderboard: FAIL (${failures.length}):\n` + failures.map((f) => `  - ${f}\n`).join(""));
  process.exit(1);
}
process.stderr.write("check_leaderboard: OK\n");

// ---------- helpers ----------

// Whether xs (numbers; null/undefined allowed only at the end) is non-decreasing.
function monotone(xs, dir) {
  let seenNull = false;
  let prev = null;
  for (const x of xs) {
    const isNull = x === null || x === undefined;
    if (isNull) { seenNull = true; continue; }
    if (seenNull) return false;
    if (prev !== null && (x - prev) * dir < 0) return false;
    prev = x;
  }
  return true;
}

// "asc", "desc", or null; ties count as both (prefers "asc" only when strictly needed).
function orderDirection(xs) {
  const asc = monotone(xs, 1);
  const desc = monotone(xs, -1);
  if (asc && desc) return "asc"; // all equal or fewer than two values
  if (asc) return "asc";
  if (desc) return "desc";
  return null;
}

async function findHeader(page, name) {
  const byKey = await page.$(`table#leaderboard thead th[data-key="${name}"]`);
  if (byKey) return byKey;
  for (const th of await page.$$("table#leaderboard thead th")) {
    const t = ((await th.textContent()) || "").trim().toLowerCase();
    if (t === name) return th;
  }
  return null;
}
