// Shared by the console's browser test (console.test.js) and its render benchmark (bench.js):
// Debian's chromium driven by playwright-core, nothing downloaded. docs/console.md, "Browser
// tests".

import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const VIEWPORT = { width: 1280, height: 800 };

// One browser and one context. ignoreHTTPSErrors: the cluster's CA is not in chromium's store.
export async function openBrowser() {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: VIEWPORT });
  return { browser, context };
}

// Prints what the page complains about, so a failing run says why.
export function watchPage(page, log = console.log) {
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  // a failed request is logged once, by the response handler, with its URL
  page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && log(`console error: ${m.text()}`));
  page.on('response', (r) => {
    if (r.status() >= 400) log(`http ${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
  });
}

// Logs in with an API token on the Login page; returns once the top bar shows the user.
export async function login(page, url, token) {
  await page.goto(url);
  await page.getByTestId('login-token').fill(token);
  await page.getByTestId('login-submit').click();
  await page.getByTestId('whoami').waitFor();
}

// Waits until the element with that test id has exactly `text` (trimmed).
export async function waitText(page, testid, text, timeout = 30000) {
  await page
    .waitForFunction(
      ([id, want]) => document.querySelector(`[data-testid="${CSS.escape(id)}"]`)?.textContent?.trim() === want,
      [testid, text],
      { timeout, polling: 50 },
    )
    .catch(async () => {
      const el = page.getByTestId(testid);
      const got = (await el.count()) ? await el.first().textContent() : '(no such element)';
      throw new Error(`${testid}: wanted "${text}" within ${timeout} ms, it shows "${got?.trim()}"`);
    });
}

// Waits until the element with that test id contains `text`.
export async function waitContains(page, testid, text, timeout = 30000) {
  await page
    .waitForFunction(
      ([id, want]) => (document.querySelector(`[data-testid="${CSS.escape(id)}"]`)?.textContent ?? '').includes(want),
      [testid, text],
      { timeout, polling: 50 },
    )
    .catch(async () => {
      const el = page.getByTestId(testid);
      const got = (await el.count()) ? await el.first().textContent() : '(no such element)';
      throw new Error(`${testid}: wanted it to contain "${text}" within ${timeout} ms, it shows "${got?.trim().slice(0, 500)}"`);
    });
}

// A real drag with the mouse: press on `from`'s centre, move in steps, release on `to`
// (element centres, or `to` plus an offset from its top-left corner).
export async function mouseDrag(page, from, to, offset) {
  const a = await from.boundingBox();
  const b = await to.boundingBox();
  if (!a || !b) throw new Error('mouseDrag: an element is not visible');
  const x0 = a.x + a.width / 2;
  const y0 = a.y + a.height / 2;
  const x1 = offset ? b.x + offset.x : b.x + b.width / 2;
  const y1 = offset ? b.y + offset.y : b.y + b.height / 2;
  await page.mouse.move(x0, y0);
  await page.mouse.down();
  await page.mouse.move(x0 + 5, y0 + 5, { steps: 2 });
  await page.mouse.move(x1, y1, { steps: 12 });
  await page.mouse.up();
}
