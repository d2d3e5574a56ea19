// The one way the browser checks load Chromium through playwright-core.
//
// env: PLAYWRIGHT_CORE  path to the playwright-core package (directory or entry file);
//                       default: import('playwright-core')

import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

export async function loadPlaywright() {
  const p = process.env.PLAYWRIGHT_CORE;
  let mod;
  if (p) {
    const abs = resolve(p);
    // playwright-core is CommonJS; require() resolves both a package directory and a file.
    const require = createRequire(import.meta.url);
    try {
      mod = require(abs);
    } catch (e) {
      if (existsSync(abs) && statSync(abs).isFile()) mod = await import(pathToFileURL(abs).href);
      else throw e;
    }
  } else {
    mod = await import("playwright-core");
  }
  const chromium = mod.chromium ?? mod.default?.chromium;
  if (!chromium) throw new Error("playwright-core module has no `chromium` export");
  return chromium;
}

/// Chromium, headless, with the flags this machine's closed network needs (without
/// the background-networking ones it retries refused connections at every start).
export async function launchChromium() {
  const chromium = await loadPlaywright();
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    timeout: 60_000,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/// Collects the page's console errors and warnings into `into` (type, text, url, line).
export function recordConsole(page, into) {
  page.on("console", (msg) => {
    const type = msg.type();
    if (type === "error" || type === "warning") {
      const loc = msg.location();
      into.push({ type, text: msg.text(), url: loc?.url ?? "", line: loc?.lineNumber ?? null });
    }
  });
}
