#!/usr/bin/env node
// Browser timings for benches/viewer_bench.py (not a test): opens one page in headless
// Chromium and prints JSON.
//
// usage: node viewer_timing.mjs list|episode URL
//   list     navigation start to the page's `epistore:rendered` mark, and the first
//            row of #episodes on screen by then
//   episode  the same, then the step list (#steps) scrolled to its end one screen per
//            animation frame, and 600 frames at 120 px a frame (a fast wheel): frame
//            times (mean, p95, worst) and frames per second
// env: CHROMIUM, PLAYWRIGHT_CORE (as tests/browser/check_page.mjs)
import { launchChromium } from "../tests/browser/playwright.mjs";

const [mode, url] = process.argv.slice(2);
if (!["list", "episode"].includes(mode) || !url) {
  process.stderr.write("usage: node viewer_timing.mjs list|episode URL\n");
  process.exit(2);
}
const browser = await launchChromium();
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  const t0 = Date.now();
  await page.goto(url, { waitUntil: "load", timeout: 120_000 });
  await page.waitForFunction(() => document.body && document.body.hasAttribute("data-rendered"), null, { timeout: 120_000 });
  const wall = Date.now() - t0;
  const out = await page.evaluate(() => {
    const m = performance.getEntriesByName("epistore:rendered")[0];
    const D = window.EPISTORE_PAGE || {};
    return {
      rendered_ms: m ? Math.round(m.startTime) : null,
      rows: D.table && Array.isArray(D.table.rows) ? D.table.rows.length : Array.isArray(D.rows) ? D.rows.length : null,
      first_row_drawn: !!document.querySelector("#episodes tbody tr.episode-row"),
      steps_total: (() => { const l = document.getElementById("steps"); return l ? Number(l.getAttribute("data-total")) : null; })(),
      steps_drawn: document.querySelectorAll("#steps .step").length,
      bytes: document.documentElement.outerHTML.length,
    };
  });
  out.load_wall_ms = wall;
  if (mode === "episode") {
    // `by`: px per frame (0: one screen); `frames`: at most that many (0: to the end,
    // waiting for the list to draw its next steps when the end of what is drawn is hit)
    const sweep = (by, most) => page.evaluate(async ([by, most]) => {
      const list = document.getElementById("steps");
      const total = Number(list.getAttribute("data-total"));
      const frame = () => new Promise((r) => requestAnimationFrame(r));
      const times = [];
      list.scrollTop = 0;
      await frame();
      let last = performance.now(), idle = 0;
      for (let i = 0; i < 100000 && (!most || i < most); i++) {
        const atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - 1;
        if (atEnd && (most || list.querySelectorAll(".step").length >= total || ++idle > 120)) break;
        if (!atEnd) idle = 0;
        list.scrollTop += by || list.clientHeight;
        await frame();
        const now = performance.now();
        times.push(now - last);
        last = now;
      }
      times.sort((a, b) => a - b);
      const mean = times.reduce((a, b) => a + b, 0) / Math.max(1, times.length);
      return {
        frames: times.length,
        mean_ms: Math.round(mean * 10) / 10,
        p95_ms: Math.round((times[Math.floor(times.length * 0.95)] || 0) * 10) / 10,
        worst_ms: Math.round((times[times.length - 1] || 0) * 10) / 10,
        fps: Math.round(1000 / Math.max(mean, 1e-9)),
        steps_drawn_at_end: document.querySelectorAll("#steps .step").length,
      };
    }, [by, most]);
    out.scroll_screens = await sweep(0, 0);
    out.scroll_wheel = await sweep(120, 600);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
} finally {
  await browser.close();
}
