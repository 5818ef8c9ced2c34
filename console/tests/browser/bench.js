// The console's render benchmark in Debian's chromium (docs/benchmarks.md, "Web console:
// rendering"); run by tests/bench/console_bench.sh against a master without agents that
// already holds 10,000 queued jobs.
//
//   YARD_URL=https://HOST:PORT YARD_TOKEN=... [RUNS=5] [LIST_RUNS=RUNS] [SHAPE=tree|lattice] \
//     node console/tests/browser/bench.js
//
// It submits RUNS jobs of 1,000 tasks each (SHAPE tree or lattice, below), then measures,
// each load in a fresh browser context (cold cache, logged in through POST /api/v1/login):
//  - Jobs page: navigation start until the first page of rows (50) is in the DOM and painted;
//  - Job page of a 1,000-task job: navigation start until the laid-out graph is drawn (the
//    "Laying out" overlay gone, the first nodes painted);
//  - then "fit view" (the whole graph, every node rendered) until all 1,000 nodes are drawn;
//  - then a live change: the page itself cancels the job, and we time, from the request, the
//    first node to show Cancelled (one state change travelling master -> event stream ->
//    node) and every node to show it (1,000 changes in a burst), with the longest main-thread
//    task during the burst.
// Prints one line per load and the medians; times are the page's own performance.now().

import { request } from 'playwright-core';
import { openBrowser, VIEWPORT } from './lib.js';

const url = process.env.YARD_URL;
const token = process.env.YARD_TOKEN;
const runs = Number(process.env.RUNS ?? 5);
const shape = process.env.SHAPE ?? 'tree';
const listRuns = Number(process.env.LIST_RUNS ?? runs);
const LAYERS = 20;
const WIDTH = 50;
const TASKS = LAYERS * WIDTH;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const ms = (x) => `${Math.round(x)} ms`;

// The 1,000-task job. `tree` (the default): a task `prep` and 50 chains of 20 tasks under it
// (the last one 19), each task depending on the one above: a pipeline sweep, every task with
// one parent. `lattice`: 20 layers of 50 tasks, each depending on two tasks of the layer above
// (1,950 edges, crossing): the worst case for the layout's crossing reduction.
function bigSpec(name, shape) {
  const task = (l, i) => `t-${String(l).padStart(2, '0')}-${String(i).padStart(2, '0')}`;
  const container = { image: 'host', resources: { cpu: '100m', memory: '32Mi' }, command: ['true'] };
  const tasks = shape === 'lattice' ? [] : [{ name: 'prep', kind: 'container-job', container }];
  for (let l = 0; l < LAYERS; l++) {
    for (let i = 0; i < WIDTH && tasks.length < TASKS; i++) {
      let dependsOn;
      if (shape === 'lattice') dependsOn = l > 0 ? [task(l - 1, i), task(l - 1, (i + 1) % WIDTH)] : undefined;
      else dependsOn = [l > 0 ? task(l - 1, i) : 'prep'];
      tasks.push({ name: task(l, i), kind: 'container-job', ...(dependsOn ? { dependsOn } : {}), container });
    }
  }
  return { name, tasks };
}

const api = await request.newContext({
  baseURL: url,
  ignoreHTTPSErrors: true,
  extraHTTPHeaders: { Authorization: `Bearer ${token}` },
});
const bigJobs = [];
for (let k = 1; k <= runs; k++) {
  const name = `${shape}-1000-${k}`;
  const r = await api.post('/api/v1/jobs', { data: bigSpec(name, shape) });
  if (r.status() !== 201) throw new Error(`POST /api/v1/jobs ${name}: ${r.status()} ${await r.text()}`);
  bigJobs.push(name);
}
const total = (await (await api.get('/api/v1/jobs?limit=1')).json()).total;
console.log(`submitted ${runs} ${shape} jobs of ${TASKS} tasks; the master holds ${total} jobs`);

const { browser } = await openBrowser();

async function freshPage() {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: VIEWPORT });
  const r = await context.request.post(url + '/api/v1/login', { data: { token }, headers: { 'X-Yard-Console': '1' } });
  if (!r.ok()) throw new Error(`login: ${r.status()} ${await r.text()}`);
  // the longest main-thread task from the start of the load (the page stays responsive)
  await context.addInitScript(() => {
    window.__longest = 0;
    new PerformanceObserver((l) => l.getEntries().forEach((e) => (window.__longest = Math.max(window.__longest, e.duration)))).observe({
      type: 'longtask',
      buffered: true,
    });
  });
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  return { context, page };
}

// The page's performance.now() at the first frame where `pred` (which returns that time,
// or false) holds; checked every animation frame.
async function whenTrue(page, pred, arg, timeout = 60000) {
  return (await page.waitForFunction(pred, arg, { polling: 'raf', timeout })).jsonValue();
}

// Where a load's time went: the app's HTML and scripts (DOMContentLoaded) and the API call
// that brings the page's data (`api` a path prefix), both from navigation start.
const breakdown = (page, api) =>
  page.evaluate((prefix) => {
    const nav = performance.getEntriesByType('navigation')[0];
    const call = performance.getEntriesByType('resource').find((e) => new URL(e.name).pathname.startsWith(prefix));
    return { dcl: nav.domContentLoadedEventEnd, data: call ? call.responseEnd : NaN };
  }, api);
const fmt = (b) => `app loaded ${ms(b.dcl)}, data ${ms(b.data)}`;

const list = [];
for (let k = 0; k < listRuns; k++) {
  const { context, page } = await freshPage();
  await page.goto(url + '/jobs', { waitUntil: 'commit' });
  const t = await whenTrue(page, () => document.querySelectorAll('[data-testid^="job-row-"]').length >= 50 && performance.now());
  const info = await page.getByTestId('page-info').textContent();
  const b = await breakdown(page, '/api/v1/jobs');
  console.log(`jobs page ${k + 1}: first 50 rows at ${ms(t)} (${info.trim()}; ${fmt(b)})`);
  list.push(t);
  await context.close();
}

const layout = [];
const all = [];
const first = [];
const burst = [];
const longest = [];
const loadLongest = [];
for (const name of bigJobs) {
  const { context, page } = await freshPage();
  await page.goto(`${url}/jobs/${name}`, { waitUntil: 'commit' });
  const t = await whenTrue(
    page,
    () => !document.querySelector('.dag-overlay') && document.querySelectorAll('.react-flow__node').length > 0 && performance.now(),
  );
  const drawn = await page.locator('.react-flow__node').count();
  const loadLong = await page.evaluate(() => window.__longest);
  const b = await breakdown(page, `/api/v1/jobs/${name}`);

  const t1 = await page.evaluate(() => {
    document.querySelector('.react-flow__controls-fitview').click();
    return performance.now();
  });
  const t2 = await whenTrue(page, (n) => document.querySelectorAll('.react-flow__node').length >= n && performance.now(), TASKS);

  // the live change: the page cancels the job itself, so both times are on its clock
  const before = await page.evaluate(() => [...document.querySelectorAll('[data-testid^="task-node-"]')].map((e) => e.dataset.state).join(','));
  const timing = page.evaluate(
    ({ job, n }) =>
      new Promise((resolve, reject) => {
        let long = 0;
        new PerformanceObserver((l) => l.getEntries().forEach((e) => (long = Math.max(long, e.duration)))).observe({ type: 'longtask' });
        let firstAt = 0;
        const t0 = performance.now();
        const check = () => {
          const states = [...document.querySelectorAll('[data-testid^="task-node-"]')].map((e) => e.dataset.state);
          const done = states.filter((s) => s === 'Cancelled').length;
          if (done > 0 && !firstAt) firstAt = performance.now();
          if (done >= n) return resolve({ first: firstAt - t0, all: performance.now() - t0, long });
          if (performance.now() - t0 > 60000) return reject(new Error(`only ${done} of ${n} nodes show Cancelled after 60 s`));
          requestAnimationFrame(check);
        };
        fetch(`/api/v1/jobs/${job}/cancel`, { method: 'POST', headers: { 'X-Yard-Console': '1' }, credentials: 'same-origin' }).then((r) =>
          r.ok ? undefined : reject(new Error(`cancel: ${r.status}`)),
        );
        requestAnimationFrame(check);
      }),
    { job: name, n: TASKS },
  );
  const c = await timing;
  const states = [...new Set(before.split(','))].join('/');
  console.log(
    `job page ${name}: graph drawn at ${ms(t)} (${fmt(b)}; ${drawn} nodes in view, ${states}; longest main-thread task ${ms(loadLong)}); fit view to all ${TASKS} drawn ${ms(t2 - t1)}; ` +
      `cancel: first node Cancelled ${ms(c.first)}, all ${ms(c.all)}, longest main-thread task ${ms(c.long)}`,
  );
  layout.push(t);
  loadLongest.push(loadLong);
  all.push(t2 - t1);
  first.push(c.first);
  burst.push(c.all);
  longest.push(c.long);
  await context.close();
}

console.log('');
if (list.length) console.log(`median of ${listRuns}: jobs page first rows ${ms(median(list))}`);
console.log(
  `median of ${runs} (${shape}): 1,000-task job page drawn ${ms(median(layout))} (longest main-thread task ${ms(median(loadLongest))}); ` +
    `fit view, every node drawn ${ms(median(all))}`,
);
console.log(
  `median of ${runs}: one live change shown ${ms(median(first))}; 1,000 changes shown ${ms(median(burst))}; longest main-thread task in the burst ${ms(median(longest))}`,
);
await browser.close();
await api.dispose();
